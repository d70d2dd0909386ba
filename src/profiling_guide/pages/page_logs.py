"""What a built page must never show: log lines, warnings, compiler output, tracebacks.

One pattern for everything that checks page text: ``scripts/record_gpu.py``
on the output a live example prints, the browser tests on every built page.
This module imports nothing heavy, so a check can use it without torch.
"""

import re

#: Warnings, Inductor's autotune tables and their source file, progress lines,
#: glog-style lines (``E1123 19:28:06 ...``), library notices and tracebacks.
LOG_MARKERS = re.compile(
    r"Traceback \(most recent call last\)|AUTOTUNE |SingleProcess AUTOTUNE|UserWarning|DeprecationWarning|"
    r"FutureWarning|TypedStorage is deprecated|building and checking|select_algorithm\.py|"
    r"(?m:^[EWI]\d{4} \d\d:\d\d:\d\d)|(?m:^\[transformers\] )"
)
