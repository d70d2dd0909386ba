"""Pure functions of a trace: who sets the pace, rates against ceilings, checked predictions, the report's analysis. No CUDA."""
