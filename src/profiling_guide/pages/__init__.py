"""What a page shows: recordings (live or replay), tables, figures, sentences of facts, the chapters' flags."""
