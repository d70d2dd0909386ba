"""Everything timed on a GPU, returned as typed records: the profiler block, timings with spreads, reference rates, the MLP benchmark, the loader benchmark."""
