#include "screen-grab.h"

#include <QCursor>
#include <QDir>
#include <QGuiApplication>
#include <QPixmap>
#include <QScreen>
#include <QStandardPaths>
#include <QTemporaryFile>

namespace Npullm {

QImage grabScreen()
{
    QScreen *screen = QGuiApplication::screenAt(QCursor::pos());
    if (!screen)
        screen = QGuiApplication::primaryScreen();
    if (!screen)
        return QImage();
    return screen->grabWindow(0).toImage();
}

QDBusUnixFileDescriptor pngFileDescriptor(const QImage &image, QString *error)
{
    QString dir = QStandardPaths::writableLocation(QStandardPaths::RuntimeLocation);
    if (dir.isEmpty() || !QDir(dir).exists())
        dir = QDir::tempPath();
    // removed when it goes out of scope; the descriptor passed on is a dup
    QTemporaryFile file(dir + QStringLiteral("/npullm-screenshot-XXXXXX.png"));
    if (!file.open()) {
        *error = file.errorString();
        return QDBusUnixFileDescriptor();
    }
    if (!image.save(&file, "PNG") || !file.flush()) {
        *error = file.errorString().isEmpty() ? QStringLiteral("cannot write the PNG") : file.errorString();
        return QDBusUnixFileDescriptor();
    }
    QDBusUnixFileDescriptor fd(file.handle());
    if (!fd.isValid())
        *error = QStringLiteral("cannot duplicate the file descriptor");
    return fd;
}

} // namespace Npullm
