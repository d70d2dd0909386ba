"""Pure functions of a trace: who sets the pace, rates against ceilings, predictions judged, the report's analysis. No CUDA."""
