"""The ROS 2 nodes (thin translations to the core classes) and their support.

Importing this package before NumPy sets ``OPENBLAS_NUM_THREADS=1`` unless the environment already sets it:
the fits solve small dense systems, which a multi-threaded BLAS slows down when the node shares the CPU
(a dynamic fit took 1-4 s with the default threads against 0.4 s with one on a loaded 2-core machine).
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
