"""Shared test setup: offline mode everywhere, so nothing ever waits on a hub."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("MPLBACKEND", "Agg")

import torch  # noqa: E402

# Tiny test models run ~20x slower with 2 threads on a shared 2-core machine; one thread is also
# what makes float results reproducible across runs. Tests that need more set it themselves.
torch.set_num_threads(1)
