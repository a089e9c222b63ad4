#!/bin/sh
# Writes the seed corpus for fuzz-image into corpus-image/ with ImageMagick
# (Debian package imagemagick): tiny images of every kind the decoder
# handles (PNG colour types, bit depths, interlacing; baseline,
# progressive, grey and CMYK JPEG; lossy, lossless, alpha and animated
# WebP), each a few hundred bytes so the fuzzer mutates them quickly.
# Run it again after changing it; the output is deterministic.
set -eu
IM=${IM:-convert-im6.q16}
command -v "$IM" >/dev/null 2>&1 || IM=convert
out=${1:-$(dirname "$0")/corpus-image}
mkdir -p "$out"
cd "$out"
src="rose: -strip -resize 12x8!"
"$IM" $src PNG24:rgb.png
"$IM" $src -alpha set -channel A -fx 'i / w' +channel PNG32:rgba.png
"$IM" $src -depth 16 PNG48:rgb16.png
"$IM" $src -colors 8 PNG8:palette.png
"$IM" $src -colorspace Gray -depth 8 PNG:gray.png
"$IM" $src -colorspace Gray -depth 2 PNG:gray2.png
"$IM" $src -interlace PNG PNG24:interlaced.png
"$IM" $src -quality 80 -sampling-factor 2x2 baseline.jpg
"$IM" $src -quality 80 -interlace JPEG progressive.jpg
"$IM" $src -colorspace Gray -quality 80 gray.jpg
"$IM" $src -colorspace CMYK -quality 80 cmyk.jpg
"$IM" $src -quality 70 lossy.webp
"$IM" $src -define webp:lossless=true lossless.webp
"$IM" $src -alpha set -channel A -fx 'i / w' +channel -quality 70 alpha.webp
"$IM" -delay 10 $src \( $src -flop \) -loop 0 animated.webp
