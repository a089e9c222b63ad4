#include "applications-watch.h"

namespace Npullm {

void ApplicationsWatch::countsChanged(uint active, uint queued)
{
    m_idle = active == 0 && queued == 0;
    if (m_idle) {
        m_again = false;
        show({});
    } else if (m_inFlight) {
        m_again = true;
    } else {
        ask();
    }
}

void ApplicationsWatch::ask()
{
    m_inFlight = true;
    m_again = false;
    Q_EMIT fetchWanted();
}

void ApplicationsWatch::answered(const QVariantList &applications)
{
    if (!m_inFlight)
        return; // nobody asked
    m_inFlight = false;
    if (m_idle)
        return; // the requests ended while the call was out
    show(applications);
    if (m_again)
        ask();
}

void ApplicationsWatch::show(const QVariantList &applications)
{
    if (applications == m_applications)
        return;
    m_applications = applications;
    Q_EMIT applicationsChanged();
}

} // namespace Npullm
