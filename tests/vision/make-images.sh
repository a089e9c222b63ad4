#!/bin/sh
# Regenerates the committed test images in tests/vision/images/ with
# ImageMagick (Debian package imagemagick), from its built-in images:
# "rose:" is a small photograph, "wizard:" and "logo:" drawings. The
# tests never run this; it documents where every file comes from.
#
#   sh tests/vision/make-images.sh
#
# Files:
#   rose.ppm                 the photograph's pixels (reference, 70x46)
#   rose.png                 8-bit RGB PNG of the same pixels
#   rose-alpha.png           RGBA, alpha ramping across: colours unchanged
#   rose-16.png              top-left 35x23 of rose, 16 bits per sample (high bytes: rose's)
#   rose-interlaced.png      Adam7 interlaced
#   rose-palette.png/.ppm    64-colour palette image and its pixels
#   rose-gray.png/.pgm       8-bit grey image and its pixels
#   rose.jpg/.jpg.ppm        baseline 4:2:0 JPEG and libjpeg's decoding of it
#   rose-progressive.jpg     progressive JPEG
#   rose-gray.jpg            greyscale JPEG
#   rose-cmyk.jpg            Adobe CMYK JPEG
#   rose-lossless.webp       lossless WebP: exactly rose's pixels
#   rose-lossy.webp          lossy WebP
#   rose-animated.webp       two-frame animation (refused by the decoder)
#   wizard.jpg               portrait drawing (120x160)
#   logo.png                 landscape drawing (120x90)
#   checker-224.png          224x224: the tiny projector's own input size
#   tall.png                 30x300 gradient: an extreme aspect ratio
#   rose-204x192.png         rose stretched to 204x192: 272 gemma4v tokens at 12 pixels a token,
#                            more than the default prefill chunk of 256
set -eu
IM=${IM:-convert-im6.q16}
command -v "$IM" >/dev/null 2>&1 || IM=convert
cd "$(dirname "$0")/images"

"$IM" rose: -strip rose.ppm
"$IM" rose: -strip PNG24:rose.png
"$IM" rose: -strip -alpha set -channel A -fx '0.2 + 0.8 * i / w' +channel PNG32:rose-alpha.png
"$IM" rose: -strip -crop 35x23+0+0 +repage -depth 16 PNG48:rose-16.png
"$IM" rose: -strip -interlace PNG PNG24:rose-interlaced.png
"$IM" rose: -strip -colors 64 PNG8:rose-palette.png
"$IM" rose-palette.png -strip rose-palette.ppm
"$IM" rose: -strip -colorspace Gray -depth 8 PNG:rose-gray.png
"$IM" rose-gray.png -strip rose-gray.pgm
"$IM" rose: -strip -quality 85 -sampling-factor 2x2 rose.jpg
"$IM" rose.jpg -strip rose.jpg.ppm
"$IM" rose: -strip -quality 80 -interlace JPEG rose-progressive.jpg
"$IM" rose: -strip -colorspace Gray -quality 85 rose-gray.jpg
"$IM" rose: -strip -colorspace CMYK -quality 92 rose-cmyk.jpg
"$IM" rose: -strip -define webp:lossless=true rose-lossless.webp
"$IM" rose: -strip -quality 80 rose-lossy.webp
"$IM" -delay 10 rose: \( rose: -flop \) -loop 0 -strip rose-animated.webp
"$IM" wizard: -strip -resize 120x160 -quality 85 wizard.jpg
"$IM" logo: -strip -resize 120x90 PNG24:logo.png
"$IM" -size 224x224 pattern:checkerboard -strip PNG24:checker-224.png
"$IM" -size 30x300 gradient:yellow-navy -strip PNG24:tall.png
"$IM" rose: -strip -resize '204x192!' PNG24:rose-204x192.png
