// "Ask about a screenshot": the screen under the mouse pointer as a PNG in
// an already deleted temporary file, handed over as a file descriptor
// (npullmd never opens client paths).
#pragma once

#include <QDBusUnixFileDescriptor>
#include <QImage>
#include <QString>

namespace Npullm {

// The screen under the pointer (the primary one when there is none);
// a null image when the platform refuses (Wayland clients may not grab).
QImage grabScreen();

// The image as a PNG in an unlinked file in $XDG_RUNTIME_DIR (or the temp
// folder); an invalid descriptor and *error set when that fails.
QDBusUnixFileDescriptor pngFileDescriptor(const QImage &image, QString *error);

} // namespace Npullm
