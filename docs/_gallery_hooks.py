"""Hooks sphinx-gallery calls between examples (named in ``reset_modules``)."""


def reset_torch(gallery_conf, fname, when=None):
    """Forget compiled graphs and free cached GPU memory so each example starts clean."""
    import torch

    torch._dynamo.reset()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
