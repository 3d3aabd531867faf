#!/usr/bin/env bash
# bench/vision_decode.sh — image decoding speed, lutra (lt.vision.io.decode_image: libpng / libjpeg-turbo to a
# float32 [3 x H x W] tensor) against PIL (Image.open + convert("RGB") + np.asarray: torchvision's ImageFolder
# loader; and PIL's decoding alone, Image.open + load), on the same bytes in memory, one thread. Writes test images (photo-like gradients and noise; JPEG quality
# 90, 4:2:0; PNG) with PIL into a temporary folder, then prints per image: milliseconds in each and the ratio
# lutra / PIL (below 1: lutra is faster). CPU time of each process (the machine is shared), medians of 7 rounds each; both runs alternate twice and the better median
# is kept. Note the CPU and the load: the numbers in bench/RESULTS.md say which.
#   bench/vision_decode.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY=/usr/bin/python3
BIN="$ROOT/${LUTRA_BUILD_DIR:-build}/bin/release/cli/lutra"
[ -x "$BIN" ] || ./lutra --build-only
DIR=$(mktemp -d /tmp/lutra-vision-decode.XXXXXX)
trap 'rm -rf "$DIR"' EXIT
"$PY" - "$DIR" <<'PY'
import sys
import numpy as np
from PIL import Image
d = sys.argv[1]
rng = np.random.default_rng(0)
for h, w in [(64, 64), (256, 256), (500, 375), (1024, 768)]:
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack([128 + 100 * np.sin(x / 17.0 + c) * np.cos(y / 23.0 - c) for c in range(3)], -1)
    img = np.clip(img + rng.normal(0, 10, (h, w, 3)), 0, 255).astype(np.uint8)
    Image.fromarray(img).save(f"{d}/{w}x{h}.jpg", quality=90)
    Image.fromarray(img).save(f"{d}/{w}x{h}.png")
PY
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
declare -A L P D
for round in 1 2; do
  while read -r n ms; do [ -z "${L[$n]:-}" ] || awk "BEGIN{exit !($ms >= ${L[$n]})}" || L[$n]=$ms; [ -n "${L[$n]:-}" ] || L[$n]=$ms; done < <("$BIN" bench/vision_decode.lua "$DIR")
  while read -r n ms ld; do
    [ -z "${P[$n]:-}" ] || awk "BEGIN{exit !($ms >= ${P[$n]})}" || P[$n]=$ms; [ -n "${P[$n]:-}" ] || P[$n]=$ms
    [ -z "${D[$n]:-}" ] || awk "BEGIN{exit !($ld >= ${D[$n]})}" || D[$n]=$ld; [ -n "${D[$n]:-}" ] || D[$n]=$ld
  done < <("$PY" bench/vision_decode_pil.py "$DIR")
done
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'); load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-14s %10s %10s %8s %14s %8s\n" image "lutra ms" "PIL ms" ratio "PIL load ms" ratio
for n in $(printf "%s\n" "${!L[@]}" | sort -t x -k1,1n); do
  printf "%-14s %10s %10s %8s %14s %8s\n" "$n" "${L[$n]}" "${P[$n]}" "$(awk "BEGIN{printf \"%.2f\", ${L[$n]} / ${P[$n]}}")" \
    "${D[$n]}" "$(awk "BEGIN{printf \"%.2f\", ${L[$n]} / ${D[$n]}}")"
done
