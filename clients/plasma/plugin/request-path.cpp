#include "request-path.h"

#include <QRegularExpression>

namespace Npullm {

QString requestPathForToken(const QString &uniqueName, const QString &handleToken)
{
    static const QRegularExpression tokenRe(QStringLiteral("^[A-Za-z0-9_]{1,64}$"));
    static const QRegularExpression uniqueRe(QStringLiteral("^:[A-Za-z0-9_.-]+$"));
    if (!tokenRe.match(handleToken).hasMatch() || !uniqueRe.match(uniqueName).hasMatch())
        return QString();
    QString sender = uniqueName.mid(1);
    sender.replace(QLatin1Char('.'), QLatin1Char('_'));
    return QStringLiteral("/org/npullm/Request/c%1_%2").arg(sender, handleToken);
}

} // namespace Npullm
