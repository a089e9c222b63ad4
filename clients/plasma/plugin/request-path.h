// The object path npullmd gives a request made with options["handle_token"]
// (docs/dbus-api.md, protocol/npullm-protocol.c): known before the call, so
// the widget subscribes to the request's signals first.
#pragma once

#include <QString>

namespace Npullm {

// ":1.42", "abc" -> "/org/npullm/Request/c1_42_abc"; empty when the token is
// not [A-Za-z0-9_]{1,64} or the name is not a unique name.
QString requestPathForToken(const QString &uniqueName, const QString &handleToken);

} // namespace Npullm
