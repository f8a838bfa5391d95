"""interp: a toolkit for the mechanistic study of Tapered Language Models (TLMs).

Heavy submodules (torch, transformers) are imported lazily by their users; importing
`interp` itself stays cheap so the CLI starts fast.
"""

__version__ = "0.1.0"
