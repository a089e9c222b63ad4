// The Plasma widget's logic that needs no shell: the request path (against
// the protocol's own definition), the per-frame token coalescer, when
// ListApplications is asked, and the widget's logic.js (device text, model
// filtering, errors in words, status lines, the conversation window, the
// applications in use) run in a QJSEngine with i18n stand-ins.
// argv[1]: the plasmoid package folder.
#include <QFile>
#include <QJSEngine>
#include <QSignalSpy>
#include <QTest>

#include "applications-watch.h"
#include "request-path.h"
#include "token-coalescer.h"

extern "C" {
#include "npullm-protocol.h"
}

static QString g_packageDir;

class TestPlasmaLogic : public QObject
{
    Q_OBJECT

    QJSEngine js;

    QJSValue call(const char *fn, const QJSValueList &args = {})
    {
        QJSValue f = js.globalObject().property(QString::fromLatin1(fn));
        if (!f.isCallable())
            qFatal("logic.js has no function %s", fn);
        QJSValue r = f.call(args);
        if (r.isError())
            qFatal("%s threw: %s", fn, qPrintable(r.toString()));
        return r;
    }

    QJSValue parse(const char *json) { return js.evaluate(QStringLiteral("(%1)").arg(QString::fromUtf8(json))); }

    QString stringify(const QJSValue &v)
    {
        return js.globalObject().property(QStringLiteral("JSON")).property(QStringLiteral("stringify"))
            .callWithInstance(js.globalObject().property(QStringLiteral("JSON")), {v}).toString();
    }

private Q_SLOTS:
    void initTestCase()
    {
        // i18n()/i18np() as Plasma's: %1.. replaced by the arguments
        js.evaluate(QStringLiteral(
            "function i18n(text) { var a = arguments;"
            "  return text.replace(/%(\\d)/g, function (m, n) { return String(a[Number(n)]); }); }"
            "function i18np(one, many, n) {"
            "  var a = Array.prototype.slice.call(arguments, 2);"
            "  return i18n.apply(null, [n === 1 ? one : many].concat(a)); }"));
        QFile f(g_packageDir + QStringLiteral("/contents/ui/logic.js"));
        QVERIFY2(f.open(QIODevice::ReadOnly), qPrintable(f.fileName()));
        const QJSValue r = js.evaluate(QString::fromUtf8(f.readAll()), f.fileName());
        QVERIFY2(!r.isError(), qPrintable(r.toString()));
    }

    void requestPathMatchesProtocol_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<QString>("token");
        QTest::newRow("doc example") << QStringLiteral(":1.42") << QStringLiteral("abc");
        QTest::newRow("widget token") << QStringLiteral(":1.7") << QStringLiteral("plasma12");
        QTest::newRow("long name") << QStringLiteral(":1.123456") << QStringLiteral("A_b_9");
        QTest::newRow("64-char token") << QStringLiteral(":1.3") << QString(64, QLatin1Char('t'));
    }

    void requestPathMatchesProtocol()
    {
        QFETCH(QString, name);
        QFETCH(QString, token);
        char *want = npp_request_path_for_token(name.toUtf8().constData(), token.toUtf8().constData());
        const QString got = Npullm::requestPathForToken(name, token);
        QCOMPARE(got, QString::fromUtf8(want));
        g_free(want);
    }

    void requestPathExample()
    {
        QCOMPARE(Npullm::requestPathForToken(QStringLiteral(":1.42"), QStringLiteral("abc")),
                 QStringLiteral("/org/npullm/Request/c1_42_abc"));
    }

    void requestPathRefusesBadInput()
    {
        QVERIFY(Npullm::requestPathForToken(QStringLiteral(":1.4"), QString()).isEmpty());
        QVERIFY(Npullm::requestPathForToken(QStringLiteral(":1.4"), QStringLiteral("a-b")).isEmpty());
        QVERIFY(Npullm::requestPathForToken(QStringLiteral(":1.4"), QString(65, QLatin1Char('t'))).isEmpty());
        QVERIFY(Npullm::requestPathForToken(QStringLiteral("org.npullm"), QStringLiteral("t")).isEmpty());
        QVERIFY(Npullm::requestPathForToken(QString(), QStringLiteral("t")).isEmpty());
    }

    void coalescerBurstIsOneUpdate()
    {
        Npullm::TokenCoalescer c(16);
        QSignalSpy spy(&c, &Npullm::TokenCoalescer::flushed);
        c.push(QStringLiteral("Hel"));
        c.push(QStringLiteral("lo"));
        c.push(QString());
        c.push(QStringLiteral(" world"));
        QCOMPARE(spy.count(), 0); // nothing before the frame
        QVERIFY(spy.wait(5000));
        QCOMPARE(spy.count(), 1);
        QCOMPARE(spy.at(0).at(0).toString(), QStringLiteral("Hello world"));
        // the next token starts a new frame
        c.push(QStringLiteral("!"));
        QVERIFY(spy.wait(5000));
        QCOMPARE(spy.count(), 2);
        QCOMPARE(spy.at(1).at(0).toString(), QStringLiteral("!"));
    }

    void coalescerFlushNowAndClear()
    {
        Npullm::TokenCoalescer c(16);
        QSignalSpy spy(&c, &Npullm::TokenCoalescer::flushed);
        c.push(QStringLiteral("a"));
        c.flushNow();
        QCOMPARE(spy.count(), 1);
        QCOMPARE(spy.at(0).at(0).toString(), QStringLiteral("a"));
        c.flushNow(); // nothing pending: no empty update
        QCOMPARE(spy.count(), 1);
        c.push(QStringLiteral("dropped"));
        c.clear();
        QCOMPARE(c.pending(), QString());
        QVERIFY(!spy.wait(100)); // the scheduled update went with it
        QCOMPARE(spy.count(), 1);
    }

    void coalescerFrameInterval()
    {
        // no screen here: one frame at 60 Hz
        const int ms = Npullm::TokenCoalescer::frameIntervalMs();
        QVERIFY(ms >= 2 && ms <= 50);
    }

    void applicationsWatchAsksOnChangesOnly()
    {
        Npullm::ApplicationsWatch w;
        QSignalSpy asked(&w, &Npullm::ApplicationsWatch::fetchWanted);
        QSignalSpy changed(&w, &Npullm::ApplicationsWatch::applicationsChanged);
        const QVariantList editor{QVariantMap{{QStringLiteral("app_id"), QStringLiteral("org.example.TextEditor")}}};
        const QVariantList two = editor + QVariantList{QVariantMap{{QStringLiteral("app_id"), QStringLiteral("x")}}};
        w.countsChanged(0, 0);
        QCOMPARE(asked.count(), 0); // idle: nothing asked, nothing shown
        QCOMPARE(changed.count(), 0);
        w.countsChanged(1, 0);
        QCOMPARE(asked.count(), 1);
        w.countsChanged(1, 1); // while asking: once more after the answer
        w.countsChanged(1, 2);
        QCOMPARE(asked.count(), 1);
        w.answered(editor);
        QCOMPARE(w.applications(), editor);
        QCOMPARE(asked.count(), 2);
        w.answered(two);
        QCOMPARE(w.applications(), two);
        QCOMPARE(asked.count(), 2);
        QCOMPARE(changed.count(), 2);
        w.answered(editor); // nobody asked for this one
        QCOMPARE(w.applications(), two);
        w.countsChanged(0, 0); // idle clears at once, without a call
        QCOMPARE(w.applications(), QVariantList());
        QCOMPARE(asked.count(), 2);
        w.countsChanged(0, 1);
        w.countsChanged(0, 0);
        w.answered(editor); // came back after idle: dropped
        QCOMPARE(w.applications(), QVariantList());
        QCOMPARE(asked.count(), 3);
        w.countsChanged(1, 0);
        w.answered(editor);
        w.countsChanged(2, 0);
        w.failed(); // an npullmd without ListApplications: nothing shown
        QCOMPARE(w.applications(), QVariantList());
        QCOMPARE(asked.count(), 5);
        QCOMPARE(changed.count(), 5);
    }

    void applicationsInWords()
    {
        const char *apps = R"([
            {"app_id": "org.example.TextEditor", "display_name": "Text Editor", "running": 1, "queued": 1},
            {"app_id": "plasmashell", "running": 1, "queued": 0},
            {"app_id": "notes-cli", "running": 0, "queued": 2},
            {"app_id": "", "source": "unknown", "running": 1, "queued": 0}])";
        const QJSValue all = parse(apps);
        QCOMPARE(call("inUseText", {parse("[]")}).toString(), QString());
        QCOMPARE(call("inUseText", {parse(R"([{"app_id": "plasmoidviewer", "running": 1}])")}).toString(), QString());
        QCOMPARE(call("inUseText", {parse(R"([{"app_id": "plasmashell"}, {"app_id": "a", "display_name": "Text Editor"}])")})
                     .toString(),
                 QStringLiteral("In use by Text Editor"));
        QCOMPARE(call("inUseText", {parse(R"([{"app_id": "notes-cli"}])")}).toString(), QStringLiteral("In use by notes-cli"));
        QCOMPARE(call("inUseText", {parse(R"([{"app_id": "a", "display_name": "A"}, {"app_id": "b"}])")}).toString(),
                 QStringLiteral("In use by A and b"));
        QCOMPARE(call("inUseText", {all}).toString(), QStringLiteral("In use by Text Editor and 2 others"));
        QCOMPARE(call("inUseText", {parse(R"([{"app_id": "a"}, {"app_id": "b"}, {"app_id": "c"}])")}).toString(),
                 QStringLiteral("In use by a and 2 others"));
        QCOMPARE(call("inUseLine", {all}).toString(),
                 QStringLiteral("In use by: Text Editor (1 running, 1 waiting), notes-cli (2 waiting), "
                                "an unknown program (1 running)"));
        QCOMPARE(call("inUseLine", {parse("[]")}).toString(), QString());
        QCOMPARE(call("indicatorText", {QStringLiteral("cpu"), parse("['tiny']"), all}).toString(),
                 QStringLiteral("CPU ● · In use by Text Editor and 2 others"));
    }

    void deviceText()
    {
        QCOMPARE(call("deviceLabel", {QStringLiteral("cpu")}).toString(), QStringLiteral("CPU"));
        QCOMPARE(call("deviceLabel", {QStringLiteral("npu-emu")}).toString(), QStringLiteral("NPU (emulated)"));
        QCOMPARE(call("deviceLabel", {QStringLiteral("npu:xdna2")}).toString(), QStringLiteral("NPU"));
        QCOMPARE(call("deviceLabel", {QString()}).toString(), QStringLiteral("…"));
        QCOMPARE(call("indicatorText", {QStringLiteral("cpu"), parse("[]")}).toString(), QStringLiteral("CPU ○"));
        QCOMPARE(call("indicatorText", {QStringLiteral("npu:xdna1"), parse("['tiny']")}).toString(),
                 QStringLiteral("NPU ●"));
        QCOMPARE(call("deviceLine", {true, QStringLiteral("cpu"), parse("['a', 'b']")}).toString(),
                 QStringLiteral("CPU — model loaded: a, b"));
        QCOMPARE(call("deviceLine", {true, QStringLiteral("cpu"), parse("[]")}).toString(),
                 QStringLiteral("CPU — no model loaded"));
        QCOMPARE(call("deviceLine", {false, QString(), parse("[]")}).toString(),
                 QStringLiteral("The npullm service is not running."));
    }

    void usableModelsOnly()
    {
        const QJSValue models = parse(R"([
            {"name": "zeta", "supported": true, "vision": false, "loaded": true},
            {"name": "broken", "supported": false, "reason": "not a GGUF file"},
            {"name": "gemma", "supported": true, "vision": true},
            {"name": "", "supported": true}])");
        QCOMPARE(stringify(call("usableModels", {models})),
                 QStringLiteral(R"j([{"name":"gemma","vision":true,"loaded":false,"label":"gemma (sees images)"},)j"
                                R"({"name":"zeta","vision":false,"loaded":true,"label":"zeta"}])"));
        QCOMPARE(call("noModelsText").toString(),
                 QStringLiteral("No models are installed. Add one with: npullm-client add FILE.gguf"));
    }

    void errorsInWords_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<QString>("message");
        QTest::addColumn<QString>("text");
        QTest::newRow("NotAuthorized") << QStringLiteral("org.npullm.Error.NotAuthorized") << QStringLiteral("no")
                                       << QStringLiteral("You are not allowed to use the assistant (polkit said no).");
        QTest::newRow("Busy") << QStringLiteral("org.npullm.Error.Busy") << QStringLiteral("MaxQueued")
                              << QStringLiteral("The assistant is busy: its queue is full. Try again in a moment.");
        QTest::newRow("NoSuchModel") << QStringLiteral("org.npullm.Error.NoSuchModel") << QString()
                                     << QStringLiteral("That model is not installed any more. Pick another one.");
        QTest::newRow("NotSupported") << QStringLiteral("org.npullm.Error.NotSupported") << QString()
                                      << QStringLiteral("This model cannot do that (a screenshot needs a model with vision).");
        QTest::newRow("ModelLoadFailed") << QStringLiteral("org.npullm.Error.ModelLoadFailed")
                                         << QStringLiteral("out of memory")
                                         << QStringLiteral("The model could not be loaded: out of memory");
        QTest::newRow("ContextOverflow") << QStringLiteral("org.npullm.Error.ContextOverflow") << QString()
                                         << QStringLiteral("The conversation is too long for the model. Start a new one.");
        QTest::newRow("InvalidArgument") << QStringLiteral("org.npullm.Error.InvalidArgument")
                                         << QStringLiteral("max_tokens: 0 is out of range")
                                         << QStringLiteral("The request was refused: max_tokens: 0 is out of range");
        QTest::newRow("not running") << QStringLiteral("org.freedesktop.DBus.Error.ServiceUnknown")
                                     << QStringLiteral("The name org.npullm was not provided by any .service files")
                                     << QStringLiteral("The npullm service is not running or not installed.");
        QTest::newRow("screenshot") << QStringLiteral("org.npullm.Plasma.Error.ScreenshotFailed")
                                    << QStringLiteral("refused")
                                    << QStringLiteral("The screenshot failed: refused");
        QTest::newRow("other") << QStringLiteral("org.npullm.Error.Internal") << QStringLiteral("boom")
                               << QStringLiteral("Something went wrong: boom");
    }

    void errorsInWords()
    {
        QFETCH(QString, name);
        QFETCH(QString, message);
        QFETCH(QString, text);
        QCOMPARE(call("errorText", {name, message}).toString(), text);
    }

    void statusLines()
    {
        QCOMPARE(call("progressText", {QStringLiteral("queued"), 3}).toString(),
                 QStringLiteral("Waiting: 3 requests ahead"));
        QCOMPARE(call("progressText", {QStringLiteral("queued"), 1}).toString(),
                 QStringLiteral("Waiting: 1 request ahead"));
        QCOMPARE(call("progressText", {QStringLiteral("queued"), 0}).toString(),
                 QStringLiteral("Waiting for the model…"));
        QCOMPARE(call("progressText", {QStringLiteral("loading"), 0}).toString(), QStringLiteral("Loading the model…"));
        QCOMPARE(call("progressText", {QStringLiteral("running"), 0}).toString(), QStringLiteral("Answering…"));
        QCOMPARE(call("progressText", {QStringLiteral("finished"), 0}).toString(), QString());
        QCOMPARE(call("finishText", {QStringLiteral("stop")}).toString(), QString());
        QCOMPARE(call("finishText", {QStringLiteral("length")}).toString(), QString());
        QCOMPARE(call("finishText", {QStringLiteral("cancelled")}).toString(), QStringLiteral("Stopped."));
        QCOMPARE(call("finishText", {QStringLiteral("error")}).toString(),
                 QStringLiteral("The answer ended early (error)."));
    }

    void conversationWindow()
    {
        const QJSValue turns = parse(R"([{"role":"system","content":"s"},
            {"role":"user","content":"1"},{"role":"assistant","content":"a1"},
            {"role":"user","content":"2"},{"role":"assistant","content":"a2"},
            {"role":"user","content":"3"},{"role":"assistant","content":""}])");
        QCOMPARE(stringify(call("trimHistory", {turns, 2})),
                 QStringLiteral(R"([{"role":"system","content":"s"},{"role":"user","content":"2"},)"
                                R"({"role":"assistant","content":"a2"},{"role":"user","content":"3"},)"
                                R"({"role":"assistant","content":""}])"));
        QCOMPARE(stringify(call("trimHistory", {turns, 0})), QStringLiteral(R"([{"role":"system","content":"s"}])"));
        QCOMPARE(call("lastAnswer", {turns}).toString(), QStringLiteral("a2"));
        QCOMPARE(call("lastAnswer", {parse("[]")}).toString(), QString());
        QCOMPARE(call("historyText", {parse(R"([{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello"}])")})
                     .toString(),
                 QStringLiteral("› Hi\n\nHello"));
    }
};

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s PLASMOID-PACKAGE-DIR [QTest options]\n", argv[0]);
        return 2;
    }
    g_packageDir = QString::fromLocal8Bit(argv[1]);
    argv[1] = argv[0];
    QCoreApplication app(argc, argv);
    TestPlasmaLogic t;
    return QTest::qExec(&t, argc - 1, argv + 1);
}

#include "test_plasma_logic.moc"
