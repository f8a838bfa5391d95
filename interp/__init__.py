"""interp: a toolkit for the mechanistic study of Tapered Language Models (TLMs).

Heavy submodules (torch, transformers) are imported lazily by their users; importing
`interp` itself stays cheap so the CLI starts fast.
"""

__version__ = "0.1.0"

from interp._util import cpu_kernels as _cpu_kernels

_cpu_kernels.request_from_env()  # INTERP_CPU_KERNELS=portable: set torch's kernel variables before torch is imported
