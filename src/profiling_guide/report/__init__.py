"""`profiling-guide report` and `profile`: one self-contained HTML page for any trace."""
