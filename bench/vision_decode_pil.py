#!/usr/bin/python3
"""bench/vision_decode_pil.py DIR — PIL's side of bench/vision_decode.sh: decodes each file of DIR (made by the
script) from its bytes to an RGB uint8 array, as torchvision's ImageFolder loader does (Image.open + convert("RGB")
+ np.asarray), and prints "name milliseconds_per_image decode_only_milliseconds" (the second: Image.open + load,
the decoding alone, to the PIL image) (CPU time of the process,
median of 7 rounds)."""
import io
import os
import statistics
import sys
import time

import numpy as np
from PIL import Image

d = sys.argv[1]
for name in sorted(os.listdir(d)):
    data = open(os.path.join(d, name), "rb").read()
    reps = 20
    rounds, loads = [], []
    for _ in range(7):
        t0 = time.process_time()
        for _ in range(reps):
            np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
        rounds.append((time.process_time() - t0) / reps * 1e3)
        t0 = time.process_time()
        for _ in range(reps):
            Image.open(io.BytesIO(data)).load()
        loads.append((time.process_time() - t0) / reps * 1e3)
    print(name, "%.4f" % statistics.median(rounds), "%.4f" % statistics.median(loads))
