"""A compatibility alias, kept for researchers' notebooks: `interp.schedules` is now the package interp.widths
(issue 50 joined schedules.py, schedules_core.py, schedules_shapes.py and taper.py there). New code imports
from interp.widths; this module re-exports its names and holds no code."""

from interp.widths import *
