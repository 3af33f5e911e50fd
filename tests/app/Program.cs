// SPDX-License-Identifier: MIT
//
// TestApp: the real .NET process that dotmon's integration tests discover and observe.
//
// Protocol (one line each, on stdout, flushed):
//   start:   "env NAME=VALUE" / "env NAME unset" for each --env-echo NAME, then "ready pid=<pid>"
//   stdin:   one command per line; each answers "ok <cmd>[ details]" or "error <cmd>: <why>"
//   stdin EOF: prints "bye stdin-eof" and exits 0, unless --no-stdin-exit (then it runs until
//            "exit" or a signal)
//   SIGTERM/SIGINT: prints "bye <signal>" and exits 0
//
// Commands:
//   ping                 answers "ok ping"
//   alloc <MB>           allocates MB 1-MiB arrays, touches every page, keeps them ("ok alloc held=<MB>")
//   free                 drops what alloc kept ("ok free")
//   churn <MB>           allocates and drops MB worth of small objects (gen0 GCs) ("ok churn")
//   gc                   GC.Collect twice with finalizers in between ("ok gc count=<gen2 count>
//                        pause-ms=<the pauses of both>")
//   throw <n> [type]     throws and catches n exceptions of type InvalidOperationException (the
//                        default), ArgumentException, FormatException or TimeoutException
//                        ("ok throw count=<n>")
//   collect <n> [gen]    exactly n blocking induced GCs of generation gen (default 2), nothing
//                        between ("ok collect n=<n> count=<collections of gen>")
//   gc-pause [nodes]     one long blocking GC: builds a graph of nodes (default 1000000) small
//                        objects with random references between as many dead ones (inside a
//                        no-GC region when the runtime grants one, so no GC while building),
//                        then GC.Collect(2, Forced, blocking, compacting), and drops the graph
//                        again ("ok gc-pause ms=<that GC's pause> build-ms=<pauses while building>
//                        wall-ms=<the GC.Collect call> nodes=<n> no-gc-region=<True|False>"; on a
//                        loaded 2-core machine 0.3 to 0.6 s for the default, 0.75 to 1.6 s for
//                        2000000, against about a millisecond for `gc`)
//   log <level> <text>   logs text under category TestApp.Commands at that LogLevel ("ok log")
//   log-cat <category> <level> <text>
//                        logs text under that category, EventId 3 "Categorized", template
//                        "{Text}" ("ok log-cat")
//   log-scope <level> <id> <text>
//                        two nested scopes, "Outer {ScopeId}" (ScopeId=<id>) and "Inner {Depth}"
//                        (Depth=2), then under TestApp.Commands EventId 4 "Scoped", template
//                        "Scoped {Text} n={N}" with N=42 ("ok log-scope")
//   log-await <text>     a record logged after an await inside a scope, in the order that puts it
//                        in the runtime's stream before its scope's start: a thread B writes an
//                        event first (a scope opened and closed), then a new thread A opens the
//                        scope "Await {ScopeId}" (ScopeId=<text>) and awaits a task B completes;
//                        the continuation, on B, logs Information under TestApp.Commands, EventId
//                        7 "AfterAwait", template "After the await {Text}", and closes the scope
//                        ("ok log-await")
//   log-exception <text> logs at Error under TestApp.Commands, EventId 5 "Failed", template
//                        "Failed {Text}", with a thrown InvalidOperationException("boom <text>")
//                        ("ok log-exception")
//   log-rate <lines/s> <seconds> <run>
//                        logs lines/s × seconds lines at Information under category
//                        TestApp.Bench, EventId 6 "Bench", template "bench {Run} {Seq} {UnixNs}"
//                        (Seq 0..n-1; UnixNs: DateTime.UtcNow in ns since 1970, taken just
//                        before each line), paced evenly; answers "ok log-rate n=<n>" once all
//                        are logged (bench/bench_logs.py measures the /logs latency with it)
//   http <port> [n] [path]
//                        starts Kestrel on 127.0.0.1:<port> (0 = any) serving GET / (200),
//                        /slow?ms=<ms> (200 after ms milliseconds) and /fail (500), then sends
//                        n (default 3) GETs of path (default /) with HttpClient, one after the
//                        other ("ok http port=<port> requests=<n>"); only / must answer 2xx;
//                        a second call reuses the running server
//   burn <ms> [threads]  spins the CPU for ms milliseconds on that many threads ("ok burn")
//   hot <ms>             on the command thread, for ms milliseconds: ~70% of the time in
//                        TestApp.Hot.SpinHotLoop, the rest in TestApp.Hot.SpinWarmLoop (10 ms
//                        rounds), for CPU-profile tests ("ok hot hot-ms=<…> warm-ms=<…>")
//   alloc-mix <ms>       for GET /profile?kind=alloc: on the command thread, for ms milliseconds,
//                        pairs of a TestApp.BigAllocType (a class of ~1000 bytes, an inline
//                        byte array) from TestApp.ProfileKinds.AllocateBig and an int[8] (56
//                        bytes) from TestApp.ProfileKinds.AllocateSmall, dropped soon after: ~95%
//                        of the bytes are BigAllocType ("ok alloc-mix rounds=<pairs>")
//   throw-n <n>          throws and catches n TestApp.ProfileKindsException from
//                        TestApp.ProfileKinds.ThrowKnown ("ok throw-n count=<n>")
//   contend <ms> [threads]
//                        that many threads (default 4) for ms milliseconds take one lock in
//                        TestApp.ProfileKinds.HoldLock and hold it 2 ms each time, so the others
//                        wait ("ok contend entered=<times the lock was taken>")
//   hot-threads <n> <ms> `hot <ms>` on the command thread while n more threads (1-256) each
//                        recurse through TestApp.Deep.A/B/C to a depth that changes every
//                        round (4-27 frames; depth and path from the thread's number and the
//                        round) and sleep
//                        1 ms at the bottom, until the hot part ends: the sample profiler takes
//                        one sample per thread per ms, mostly with a stack it has not seen just
//                        before, so a CPU trace grows fast (bench/bench_convert.sh speedscope);
//                        answers `hot`'s line with " threads=<n> rounds=<sum of their rounds>"
//   park                 a thread "dm-waiter" blocked in A.B.Wait and a thread "dm-spinner"
//                        spinning in C.D.Spin (tests/app/Parked.cs), for GET /stacks; answers
//                        "ok park waiter=<tid> spinner=<tid>" with their kernel thread ids
//   unpark               ends them ("ok unpark")
//   work-throwing <ms> <rate>
//                        `work <ms>` on this thread while another throws and catches rate
//                        InvalidOperationExceptions a second (in 1 ms steps), for
//                        bench/bench_exceptions.py; answers work's line with " thrown=<n>"
//   throw-kinds          throws and catches a nested exception, one from async code and one from
//                        an exception filter (tests/app/Thrower.cs), for GET /exceptions;
//                        answers "ok throw-kinds caught=3"
//   work <ms>            the app's own work rate for bench/: for ms milliseconds, rounds of
//                        parsing and formatting 64 numbers into fresh strings and a small
//                        object array, 1 in 64 rounds kept in a 4096-slot window (so some
//                        survive a gen0 GC: GC, allocation-tick and survival events to trace);
//                        answers "ok work ops=<rounds> ms=<elapsed> gen0=<gen0 GCs> gen1=<…>
//                        gen2=<…>" (ops / ms is the rate to compare)
//   events <n> <chars> [threads] [MB/s]
//                        writes n events DotMon-TestApp/Blob (int Thread, long Index, string Text
//                        of <chars> characters), split over that many threads (default 1), paced
//                        to about that many MB/s of UTF-16 text (default 0: as fast as possible);
//                        answers "ok events n=<n>" once all are written. Index runs 0..n-1 over
//                        all threads, so a reader can tell exactly which events arrived
//   events-mark          one more Blob (Index -1) from each writer thread `events` has used
//                        ("ok events-mark n=<threads>"): each thread's last sequence number then
//                        shows in the trace, so drops at the end of a storm can be counted
//   env <NAME>           "ok env NAME=VALUE" or "ok env NAME unset"
//   meter-add <n>        n steps of the meter TestApp.Meter (version 1.0.0, meter tag
//                        app=testapp): step k (k = 1, 2, ... over the process's life) adds 1 to
//                        Counter testapp.requests ({request}; instrument tag tier=test; value
//                        tags code=200 and route=/a for odd k, /b for even k), records k mod 10 + 0.5
//                        in Histogram testapp.latency (ms), and moves UpDownCounter
//                        testapp.queue.depth ({item}) so that it equals k mod 10; ObservableGauge
//                        testapp.temperature (Cel) reads 20 + (k mod 10) / 2 for the last k.
//                        Answers "ok meter-add total=<k>". A metrics session sees counter and
//                        up-down values summed from the moment it started listening (so
//                        queue.depth shows k mod 10 only for a session that began at k = 0)
//   meter-add <n> <seconds>
//                        the same n steps spread evenly over that many seconds (a share every
//                        100 ms), answering once all are done: a steady rate of n / seconds
//   hist-record <seconds> <value>:<count>...
//                        every 100 ms for that many seconds (once when 0), records each value
//                        count times in Histogram testapp.latency, so each collection interval
//                        sees the same mix (e.g. `hist-record 4 5:97 5000:3`: p95 5, p99 5000).
//                        Answers "ok hist-record n=<values recorded>"
//   tp-block <items> <seconds>
//                        queues items thread-pool work items that all wait on one gate, opened
//                        after seconds: the pool's threads block and the other items wait in
//                        its queue (System.Runtime threadpool-queue-length). Answers once all
//                        ran: "ok tp-block items=<items> max-queue=<largest
//                        ThreadPool.PendingWorkItemCount seen, sampled every 100 ms>"
//   counters-add <n>     n steps of the EventSource TestApp.Counters: step k writes k mod 10 + 1
//                        to EventCounter work-time ("Work Time", ms) and 1 to
//                        IncrementingEventCounter ops ("Operations", per second);
//                        PollingCounter queue-length ("Queue Length") reads k mod 10 and
//                        IncrementingPollingCounter total-ops ("Total Operations") reads k. All
//                        four carry metadata source:testapp. Answers "ok counters-add total=<k>"
//   heap-graph <N> <M> <SIZE>
//                        for heap snapshots (/gcdump): replaces what an earlier heap-graph held
//                        with N TestApp.GcDumpHolder objects rooted by a static List, each holding
//                        M byte[SIZE] (its only field, a byte[][] of length M), plus one extra
//                        TestApp.GcDumpHolder (with M byte[SIZE] of its own) held only by a
//                        GCHandle (Normal). So a snapshot sees N + 1 GcDumpHolder objects,
//                        (N + 1) * M byte[SIZE] arrays and N + 1 byte[][] arrays from it, and
//                        one List<GcDumpHolder> with its GcDumpHolder[] backing array.
//                        Answers "ok heap-graph n=<N> m=<M> size=<SIZE>"
//   heap-graph-free      drops them all (the list and the handle) ("ok heap-graph-free")
//   activity <name>      under the ActivitySource TestApp.Demo (version 1.0.0): a Server activity
//                        <name> (tags demo.name=<name>, demo.n=42) around a Client child
//                        <name>.child (tag demo.flag=true, status Error "child failed"), each
//                        lasting at least 2 ms; answers "ok activity trace=<trace id>
//                        parent=<span id> child=<span id>" (hex), or "ok activity none" when no
//                        listener (a DiagnosticSource session asking for the source) samples it
//   exit <code>          answers "ok exit" and exits with that code
//
// Flags: --no-stdin-exit, --env-echo NAME (repeatable), --heartbeat-ms N (default 1000, 0 = off),
// --gc-ms N (a GC.Collect every N ms, default 0 = off: for a container with no stdin, where the
// `gc` command cannot be sent), --metrics-ms N (a `meter-add 1` and a `counters-add 1` every N
// ms, default 0 = off: metrics that move without stdin), --console-log (also log to stderr). Logging
// modes (what /logs can see; each leaves the assemblies of the others unloaded, so a loader rundown
// tells them apart):
//   (default)                     a LoggerFactory with the EventSource logger
//   --no-eventsource-logger       LoggerFactory.Create without it: Microsoft.Extensions.Logging.dll
//                                 loaded, Microsoft.Extensions.Logging.EventSource.dll not
//   --eventsource-logger-cleared  AddEventSourceLogger() then ClearProviders(): the EventSource
//                                 assembly loaded, but no such provider logs
//   --no-logging                  no Microsoft.Extensions.Logging at all (a NullLoggerFactory from
//                                 the Abstractions assembly: the log commands do nothing)
// Any other argument is ignored, so tests can put markers on the command line (they show up in
// dotmon's /process commandLine).
//
// In the background a heartbeat allocates a little and logs at Information under category
// TestApp.Heartbeat, so traces and log streams always have GCs and log events to see.

using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Diagnostics;
using System.Diagnostics.Metrics;
using System.Diagnostics.Tracing;
using System.Globalization;
using System.Linq;
using System.Net;
using System.Net.Http;
using System.Runtime;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using System.Threading;
using System.Threading.Tasks;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.AspNetCore.Hosting.Server;
using Microsoft.AspNetCore.Hosting.Server.Features;
using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Hosting;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Logging.Abstractions;

namespace TestApp;

internal static class Program
{
    private static readonly object OutLock = new();
    private static readonly List<byte[]> Held = new();
    private static ILoggerFactory s_loggerFactory = null!;
    private static ILogger s_commandLogger = null!;
    private static WebApplication? s_web;
    private static int s_webPort;
    private static long s_heartbeats;
    private static volatile object? s_sink;
    private static long s_workSum;

    private static int Main(string[] args)
    {
        bool stdinExit = true;
        bool consoleLog = false;
        var logging = LoggingMode.EventSource;
        int heartbeatMs = 1000;
        int gcMs = 0;
        int metricsMs = 0;
        var echo = new List<string>();
        for (int i = 0; i < args.Length; i++)
        {
            switch (args[i])
            {
                case "--no-stdin-exit":
                    stdinExit = false;
                    break;
                case "--no-eventsource-logger":
                    logging = LoggingMode.NoEventSource;
                    break;
                case "--eventsource-logger-cleared":
                    logging = LoggingMode.EventSourceCleared;
                    break;
                case "--no-logging":
                    logging = LoggingMode.None;
                    break;
                case "--console-log":
                    consoleLog = true;
                    break;
                case "--env-echo" when i + 1 < args.Length:
                    echo.Add(args[++i]);
                    break;
                case "--heartbeat-ms" when i + 1 < args.Length:
                    if (!int.TryParse(args[++i], NumberStyles.None, CultureInfo.InvariantCulture, out heartbeatMs))
                    {
                        Console.Error.WriteLine("TestApp: --heartbeat-ms needs a non-negative integer");
                        return 2;
                    }
                    break;
                case "--gc-ms" when i + 1 < args.Length:
                    if (!int.TryParse(args[++i], NumberStyles.None, CultureInfo.InvariantCulture, out gcMs))
                    {
                        Console.Error.WriteLine("TestApp: --gc-ms needs a non-negative integer");
                        return 2;
                    }
                    break;
                case "--metrics-ms" when i + 1 < args.Length:
                    if (!int.TryParse(args[++i], NumberStyles.None, CultureInfo.InvariantCulture, out metricsMs))
                    {
                        Console.Error.WriteLine("TestApp: --metrics-ms needs a non-negative integer");
                        return 2;
                    }
                    break;
                case "--env-echo":
                case "--gc-ms":
                case "--metrics-ms":
                case "--heartbeat-ms":
                    Console.Error.WriteLine($"TestApp: {args[i]} needs a value");
                    return 2;
                default:
                    break; // markers and anything else a test wants on the command line
            }
        }

        s_loggerFactory = logging == LoggingMode.None
            ? NullLoggerFactory.Instance
            : CreateLoggerFactory(logging, consoleLog);
        s_commandLogger = s_loggerFactory.CreateLogger("TestApp.Commands");

        // Exit cleanly on SIGTERM/SIGINT. Without this, a Kestrel host started by `http` would
        // swallow SIGTERM (ConsoleLifetime cancels it to stop only the host).
        using var onTerm = PosixSignalRegistration.Create(PosixSignal.SIGTERM, OnSignal);
        using var onInt = PosixSignalRegistration.Create(PosixSignal.SIGINT, OnSignal);

        Timer? heartbeat = null;
        if (heartbeatMs > 0)
        {
            ILogger hbLogger = s_loggerFactory.CreateLogger("TestApp.Heartbeat");
            heartbeat = new Timer(_ => Heartbeat(hbLogger), null, heartbeatMs, heartbeatMs);
        }

        using Timer? collector = gcMs > 0 ? new Timer(_ => GC.Collect(), null, gcMs, gcMs) : null;

        // The meter and the EventSource exist from the start, so a session sees them at once.
        TestMetrics.Init();
        _ = TestAppCounters.Log;
        using Timer? metricsTicker = metricsMs > 0
            ? new Timer(_ =>
            {
                TestMetrics.Add(1);
                TestAppCounters.Log.Add(1);
            }, null, metricsMs, metricsMs)
            : null;

        foreach (string name in echo)
        {
            Say(EnvLine(name));
        }
        // The runtime created its diagnostic socket before Main ran, so after this line a test
        // can rely on the socket being there.
        Say($"ready pid={Environment.ProcessId}");

        string? line;
        while ((line = Console.In.ReadLine()) != null)
        {
            line = line.Trim();
            if (line.Length == 0)
            {
                continue;
            }
            string[] words = line.Split(' ', 2, StringSplitOptions.RemoveEmptyEntries);
            string cmd = words[0];
            string rest = words.Length > 1 ? words[1].Trim() : "";
            try
            {
                Say(Run(cmd, rest));
            }
            catch (Exception e)
            {
                Say($"error {cmd}: {e.GetType().Name}: {e.Message.ReplaceLineEndings(" ")}");
            }
        }

        if (!stdinExit)
        {
            Thread.Sleep(Timeout.Infinite); // until `exit` (impossible now) or a signal
        }
        heartbeat?.Dispose();
        Say("bye stdin-eof");
        Shutdown();
        return 0;
    }

    private enum LoggingMode
    {
        EventSource,
        NoEventSource,
        EventSourceCleared,
        None,
    }

    // The JIT loads the assembly of every method a method calls, taken branch or not, so each
    // assembly that a logging mode must leave unloaded is only named in a method of its own.
    [MethodImpl(MethodImplOptions.NoInlining)]
    private static ILoggerFactory CreateLoggerFactory(LoggingMode logging, bool consoleLog)
    {
        return LoggerFactory.Create(builder =>
        {
            // Everything reaches the providers; the EventSource provider filters by what its
            // listener (a trace session) asked for.
            builder.SetMinimumLevel(LogLevel.Trace);
            if (logging is LoggingMode.EventSource or LoggingMode.EventSourceCleared)
            {
                AddEventSourceLogger(builder);
            }
            if (logging == LoggingMode.EventSourceCleared)
            {
                builder.ClearProviders();
            }
            if (consoleLog)
            {
                AddConsoleLogger(builder);
            }
        });
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private static void AddEventSourceLogger(ILoggingBuilder builder) => builder.AddEventSourceLogger();

    [MethodImpl(MethodImplOptions.NoInlining)]
    private static void AddConsoleLogger(ILoggingBuilder builder) =>
        builder.AddConsole(o => o.LogToStandardErrorThreshold = LogLevel.Trace);

    // See log-await above. The runtime writes each thread's events together, the thread with the
    // oldest event first: B's (the record among them) before A's (the scope's start).
    private static void LogAfterAwait(string text)
    {
        var resume = new TaskCompletionSource(); // its continuations run on the completing thread
        Task? body = null;
        var b = new Thread(() =>
        {
            using (s_commandLogger.BeginScope("Before {ScopeId}", text))
            {
            }
            var a = new Thread(() => body = Body());
            a.Start();
            a.Join(); // A returned at the await
            resume.SetResult();
        });
        b.Start();
        b.Join();
        body!.Wait();

        async Task Body()
        {
            using (s_commandLogger.BeginScope("Await {ScopeId}", text))
            {
                await resume.Task;
                s_commandLogger.LogInformation(new EventId(7, "AfterAwait"), "After the await {Text}", text);
            }
        }
    }

    private static string Run(string cmd, string rest)
    {
        switch (cmd)
        {
            case "ping":
                return "ok ping";
            case "alloc":
                return Alloc(ParseInt(rest, "MB", 0, 1 << 16));
            case "free":
                lock (Held)
                {
                    Held.Clear();
                }
                return "ok free";
            case "churn":
                Churn(ParseInt(rest, "MB", 0, 1 << 20));
                return "ok churn";
            case "gc":
                {
                    TimeSpan before = GC.GetTotalPauseDuration();
                    GC.Collect();
                    GC.WaitForPendingFinalizers();
                    GC.Collect();
                    double pause = (GC.GetTotalPauseDuration() - before).TotalMilliseconds;
                    return string.Create(CultureInfo.InvariantCulture,
                        $"ok gc count={GC.CollectionCount(2)} pause-ms={pause:F1}");
                }
            case "throw":
                {
                    string[] parts = Words(rest, 1, "usage: throw <n> [type]");
                    int n = ParseInt(parts[0], "n", 0, 1_000_000);
                    ThrowAndCatch(n, parts.Length > 1 ? parts[1] : nameof(InvalidOperationException));
                    return $"ok throw count={n}";
                }
            case "collect":
                {
                    string[] parts = Words(rest, 1, "usage: collect <n> [generation]");
                    int n = ParseInt(parts[0], "n", 0, 10_000);
                    int gen = parts.Length > 1 ? ParseInt(parts[1], "generation", 0, 2) : 2;
                    for (int i = 0; i < n; i++)
                    {
                        GC.Collect(gen, GCCollectionMode.Forced, blocking: true);
                    }
                    return $"ok collect n={n} count={GC.CollectionCount(gen)}";
                }
            case "heap-graph":
                {
                    string[] parts = Words(rest, 3, "usage: heap-graph <N> <M> <SIZE>");
                    int n = ParseInt(parts[0], "N", 0, 10_000_000);
                    int m = ParseInt(parts[1], "M", 0, 1_000_000);
                    int size = ParseInt(parts[2], "SIZE", 0, 1 << 30);
                    GcDumpHolder.Build(n, m, size);
                    return $"ok heap-graph n={n} m={m} size={size}";
                }
            case "heap-graph-free":
                GcDumpHolder.Free();
                return "ok heap-graph-free";
            case "gc-pause":
                {
                    string[] parts = rest.Length > 0 ? Words(rest, 1, "usage: gc-pause [nodes]") : new[] { "1000000" };
                    return GcPause(ParseInt(parts[0], "nodes", 1, 50_000_000));
                }
            case "log":
                {
                    string[] parts = rest.Split(' ', 2);
                    if (!Enum.TryParse(parts[0], true, out LogLevel level) || !Enum.IsDefined(level) ||
                        level == LogLevel.None)
                    {
                        throw new ArgumentException($"unknown level '{parts[0]}'");
                    }
                    string text = parts.Length > 1 ? parts[1] : "";
                    s_commandLogger.Log(level, new EventId(1, "Command"), "{Text}", text);
                    return "ok log";
                }
            case "log-cat":
                {
                    string[] parts = rest.Split(' ', 3);
                    if (parts.Length < 2 || !Enum.TryParse(parts[1], true, out LogLevel level) ||
                        !Enum.IsDefined(level) || level == LogLevel.None)
                    {
                        throw new ArgumentException("usage: log-cat <category> <level> <text>");
                    }
                    ILogger logger = s_loggerFactory.CreateLogger(parts[0]);
                    logger.Log(level, new EventId(3, "Categorized"), "{Text}", parts.Length > 2 ? parts[2] : "");
                    return "ok log-cat";
                }
            case "log-scope":
                {
                    string[] parts = rest.Split(' ', 3);
                    if (parts.Length < 2 || !Enum.TryParse(parts[0], true, out LogLevel level) ||
                        !Enum.IsDefined(level) || level == LogLevel.None)
                    {
                        throw new ArgumentException("usage: log-scope <level> <id> <text>");
                    }
                    using (s_commandLogger.BeginScope("Outer {ScopeId}", parts[1]))
                    using (s_commandLogger.BeginScope("Inner {Depth}", 2))
                    {
                        s_commandLogger.Log(level, new EventId(4, "Scoped"), "Scoped {Text} n={N}",
                            parts.Length > 2 ? parts[2] : "", 42);
                    }
                    return "ok log-scope";
                }
            case "log-await":
                {
                    LogAfterAwait(rest);
                    return "ok log-await";
                }
            case "log-exception":
                {
                    try
                    {
                        throw new InvalidOperationException("boom " + rest);
                    }
                    catch (InvalidOperationException e)
                    {
                        s_commandLogger.LogError(new EventId(5, "Failed"), e, "Failed {Text}", rest);
                    }
                    return "ok log-exception";
                }
            case "log-rate":
                {
                    string[] parts = Words(rest, 3, "usage: log-rate <lines/s> <seconds> <run>");
                    int rate = ParseInt(parts[0], "lines/s", 1, 1_000_000);
                    int seconds = ParseInt(parts[1], "seconds", 0, 3600);
                    return $"ok log-rate n={LogRate(rate, seconds, parts[2])}";
                }
            case "http":
                {
                    string[] parts = Words(rest, 1, "usage: http <port> [n] [path]");
                    int port = ParseInt(parts[0], "port", 0, 65535);
                    int n = parts.Length > 1 ? ParseInt(parts[1], "n", 0, 10_000) : 3;
                    string path = parts.Length > 2 ? parts[2] : "/";
                    Http(port, n, path).GetAwaiter().GetResult();
                    return $"ok http port={s_webPort} requests={n}";
                }
            case "burn":
                {
                    string[] parts = Words(rest, 1, "usage: burn <ms> [threads]");
                    int ms = ParseInt(parts[0], "ms", 0, 600_000);
                    int threads = parts.Length > 1 ? ParseInt(parts[1], "threads", 1, 64) : 1;
                    Burn(ms, threads);
                    return "ok burn";
                }
            case "hot":
                return Hot.Run(ParseInt(rest, "ms", 1, 600_000));
            case "alloc-mix":
                return ProfileKinds.AllocMix(ParseInt(rest, "ms", 1, 600_000));
            case "throw-n":
                return ProfileKinds.ThrowN(ParseInt(rest, "n", 0, 1_000_000));
            case "contend":
                {
                    string[] parts = Words(rest, 1, "usage: contend <ms> [threads]");
                    int ms = ParseInt(parts[0], "ms", 1, 600_000);
                    int threads = parts.Length > 1 ? ParseInt(parts[1], "threads", 2, 64) : 4;
                    return ProfileKinds.Contend(ms, threads);
                }
            case "hot-threads":
                {
                    string[] parts = Words(rest, 2, "usage: hot-threads <n> <ms>");
                    return Deep.Run(ParseInt(parts[0], "n", 1, 256), ParseInt(parts[1], "ms", 1, 600_000));
                }
            case "work":
                return Work(ParseInt(rest, "ms", 1, 600_000));
            case "park":
                return Parked.Park();
            case "throw-kinds":
                return E.Thrower.Run();
            case "work-throwing":
                {
                    string[] parts = Words(rest, 2, "usage: work-throwing <ms> <exceptions/s>");
                    return WorkThrowing(ParseInt(parts[0], "ms", 1, 600_000), ParseInt(parts[1], "rate", 0, 1_000_000));
                }
            case "unpark":
                return Parked.Unpark();
            case "events":
                {
                    string[] parts = Words(rest, 2, "usage: events <n> <chars> [threads] [MB/s]");
                    int n = ParseInt(parts[0], "n", 0, 100_000_000);
                    int chars = ParseInt(parts[1], "chars", 0, 30_000);
                    int threads = parts.Length > 2 ? ParseInt(parts[2], "threads", 1, 64) : 1;
                    int mbps = parts.Length > 3 ? ParseInt(parts[3], "MB/s", 0, 10_000) : 0;
                    Events(n, chars, threads, mbps);
                    return $"ok events n={n}";
                }
            case "events-mark":
                return $"ok events-mark n={EventsMark()}";
            case "env":
                return "ok " + EnvLine(rest);
            case "meter-add":
                {
                    string[] parts = Words(rest, 1, "usage: meter-add <n> [seconds]");
                    int n = ParseInt(parts[0], "n", 0, 10_000_000);
                    int seconds = parts.Length > 1 ? ParseInt(parts[1], "seconds", 0, 3600) : 0;
                    return $"ok meter-add total={MeterAdd(n, seconds)}";
                }
            case "hist-record":
                {
                    string[] parts = Words(rest, 2, "usage: hist-record <seconds> <value>:<count>...");
                    int seconds = ParseInt(parts[0], "seconds", 0, 3600);
                    var batch = new List<(double Value, int Count)>();
                    foreach (string item in parts.Skip(1))
                    {
                        string[] vc = item.Split(':');
                        if (vc.Length != 2 || !double.TryParse(vc[0], NumberStyles.Float, CultureInfo.InvariantCulture,
                                out double value))
                        {
                            throw new ArgumentException($"expected <value>:<count>, got '{item}'");
                        }
                        batch.Add((value, ParseInt(vc[1], "count", 0, 1_000_000)));
                    }
                    return $"ok hist-record n={HistRecord(seconds, batch)}";
                }
            case "tp-block":
                {
                    string[] parts = Words(rest, 2, "usage: tp-block <items> <seconds>");
                    int items = ParseInt(parts[0], "items", 1, 1_000_000);
                    int seconds = ParseInt(parts[1], "seconds", 0, 3600);
                    return $"ok tp-block items={items} max-queue={ThreadPoolBlock(items, seconds)}";
                }
            case "activity":
                return Activities(Words(rest, 1, "usage: activity <name>")[0]);
            case "counters-add":
                return $"ok counters-add total={TestAppCounters.Log.Add(ParseInt(rest, "n", 0, 10_000_000))}";
            case "exit":
                {
                    int code = ParseInt(rest, "code", 0, 255);
                    Say("ok exit");
                    Shutdown();
                    Environment.Exit(code);
                    return "unreachable";
                }
            default:
                throw new ArgumentException("unknown command");
        }
    }

    // The words of a command's arguments; at least min of them, else an error with the usage.
    private static string[] Words(string rest, int min, string usage)
    {
        string[] words = rest.Split(' ', StringSplitOptions.RemoveEmptyEntries);
        if (words.Length < min)
        {
            throw new ArgumentException(usage);
        }
        return words;
    }

    private static int ParseInt(string s, string what, int min, int max)
    {
        if (!int.TryParse(s, NumberStyles.AllowLeadingSign, CultureInfo.InvariantCulture, out int v) ||
            v < min || v > max)
        {
            throw new ArgumentException($"{what} must be an integer in [{min}, {max}], got '{s}'");
        }
        return v;
    }

    private static string EnvLine(string name)
    {
        string? v = Environment.GetEnvironmentVariable(name);
        return v == null ? $"env {name} unset" : $"env {name}={v}";
    }

    private static void Say(string line)
    {
        lock (OutLock)
        {
            Console.Out.WriteLine(line);
            Console.Out.Flush();
        }
    }

    private static void OnSignal(PosixSignalContext ctx)
    {
        ctx.Cancel = true;
        Say($"bye {ctx.Signal}");
        Shutdown();
        Environment.Exit(0);
    }

    private static void Shutdown()
    {
        try
        {
            s_web?.StopAsync(TimeSpan.FromSeconds(2)).GetAwaiter().GetResult();
        }
        catch (Exception)
        {
            // Best effort: the process is going away anyway.
        }
        s_loggerFactory.Dispose();
    }

    private static string Alloc(int mb)
    {
        var chunks = new List<byte[]>(mb);
        for (int i = 0; i < mb; i++)
        {
            var chunk = new byte[1 << 20];
            // Touch every page so the memory is resident (RSS), not just reserved.
            for (int off = 0; off < chunk.Length; off += 4096)
            {
                chunk[off] = (byte)(i + 1);
            }
            chunks.Add(chunk);
        }
        lock (Held)
        {
            Held.AddRange(chunks);
            return $"ok alloc held={Held.Count}";
        }
    }

    private static readonly ActivitySource DemoSource = new("TestApp.Demo", "1.0.0");

    // A parent and a child activity, for the span tests: both exist only when a listener asks.
    private static string Activities(string name)
    {
        using Activity? parent = DemoSource.StartActivity(name, ActivityKind.Server);
        if (parent == null)
        {
            return "ok activity none";
        }
        parent.SetTag("demo.name", name);
        parent.SetTag("demo.n", 42);
        string childId;
        using (Activity? child = DemoSource.StartActivity(name + ".child", ActivityKind.Client))
        {
            child?.SetTag("demo.flag", true);
            child?.SetStatus(ActivityStatusCode.Error, "child failed");
            Thread.Sleep(2);
            childId = child?.SpanId.ToHexString() ?? "none";
        }
        Thread.Sleep(2);
        return $"ok activity trace={parent.TraceId.ToHexString()} parent={parent.SpanId.ToHexString()} child={childId}";
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private static string Work(int ms)
    {
        var kept = new object[4096];
        int g0 = GC.CollectionCount(0), g1 = GC.CollectionCount(1), g2 = GC.CollectionCount(2);
        var watch = Stopwatch.StartNew();
        long ops = 0;
        while (watch.ElapsedMilliseconds < ms)
        {
            for (int batch = 0; batch < 16; batch++, ops++)
            {
                var round = new object[64];
                long sum = 0;
                for (int i = 0; i < round.Length; i++)
                {
                    string text = (ops * 64 + i).ToString(CultureInfo.InvariantCulture);
                    sum += long.Parse(text, CultureInfo.InvariantCulture);
                    round[i] = text;
                }
                if ((ops & 63) == 0)
                {
                    kept[(ops >> 6) & (kept.Length - 1)] = round;
                }
                s_workSum += sum;
            }
        }
        double elapsed = watch.Elapsed.TotalMilliseconds;
        return string.Create(CultureInfo.InvariantCulture,
            $"ok work ops={ops} ms={elapsed:F0} gen0={GC.CollectionCount(0) - g0} gen1={GC.CollectionCount(1) - g1} gen2={GC.CollectionCount(2) - g2}");
    }

    private static string WorkThrowing(int ms, int rate)
    {
        using var stop = new ManualResetEventSlim();
        long thrown = 0;
        var thrower = new Thread(() =>
        {
            var watch = Stopwatch.StartNew();
            while (!stop.IsSet)
            {
                long due = (long)(watch.Elapsed.TotalMilliseconds * rate / 1000.0);
                if (thrown < due)
                {
                    ThrowAndCatch((int)Math.Min(due - thrown, 1000), nameof(InvalidOperationException));
                    thrown += Math.Min(due - thrown, 1000);
                }
                else
                {
                    Thread.Sleep(1);
                }
            }
        }) { IsBackground = true, Name = "dm-thrower" };
        thrower.Start();
        string work = Work(ms);
        stop.Set();
        thrower.Join();
        return string.Create(CultureInfo.InvariantCulture, $"{work} thrown={thrown}");
    }

    private static void Churn(int mb)
    {
        // 256-byte objects, dropped at once: gen0 collections without growing the heap.
        long total = (long)mb << 20;
        for (long done = 0; done < total; done += 256)
        {
            s_sink = new byte[232];
        }
        s_sink = null;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private static void ThrowAndCatch(int n, string type)
    {
        // Checked before the first throw, so a bad name throws nothing.
        Func<int, Exception> make = type switch
        {
            nameof(InvalidOperationException) => i => new InvalidOperationException($"TestApp exception {i}"),
            nameof(ArgumentException) => i => new ArgumentException($"TestApp exception {i}"),
            nameof(FormatException) => i => new FormatException($"TestApp exception {i}"),
            nameof(TimeoutException) => i => new TimeoutException($"TestApp exception {i}"),
            _ => throw new ArgumentException($"unknown exception type '{type}'"),
        };
        for (int i = 0; i < n; i++)
        {
            try
            {
                ThrowOne(make(i));
            }
            catch (Exception)
            {
                // Expected: tests count first-chance exceptions.
            }
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    private static void ThrowOne(Exception e)
    {
        throw e;
    }

    private sealed class Node
    {
        public Node? Next;
        public Node? Other;
        public long Value;
    }

    // A long blocking GC pause: a graph of `nodes` small objects, each pointing at the previous one
    // and at a random earlier one (marking chases pointers all over the heap), allocated between as
    // many dead ones (a compacting GC moves every survivor and fixes every reference), then one
    // blocking compacting gen2 GC. The graph is dropped again, so later GCs are short (the next
    // one frees it: tens of ms at most). Answers the
    // pause of that GC (GC.GetTotalPauseDuration before and after, so the suspension included),
    // the pauses of the GCs while building, and the GC's wall time.
    [MethodImpl(MethodImplOptions.NoInlining)]
    private static string GcPause(int nodes)
    {
        var rng = new Random(42);
        var all = new Node[nodes];
        TimeSpan p0 = GC.GetTotalPauseDuration();
        // No GC while building, where it can: a GC of a half-built graph would be a long pause too.
        bool noGc = false;
        try
        {
            noGc = GC.TryStartNoGCRegion((long)nodes * 2 * 48);
        }
        catch (ArgumentOutOfRangeException)
        {
            // more than the runtime allows: the building GCs happen
        }
        Node? prev = null;
        for (int i = 0; i < nodes; i++)
        {
            var n = new Node { Next = prev, Value = i };
            n.Other = i > 0 ? all[rng.Next(i)] : n;
            all[i] = n;
            prev = n;
            s_sink = new Node { Value = -i }; // dead at once: a hole between survivors
        }
        s_sink = null;
        if (noGc && GCSettings.LatencyMode == GCLatencyMode.NoGCRegion)
        {
            GC.EndNoGCRegion();
        }
        TimeSpan p1 = GC.GetTotalPauseDuration();
        var wall = Stopwatch.StartNew();
        GC.Collect(2, GCCollectionMode.Forced, blocking: true, compacting: true);
        wall.Stop();
        TimeSpan p2 = GC.GetTotalPauseDuration();
        GC.KeepAlive(all);
        GC.KeepAlive(prev);
        return string.Create(CultureInfo.InvariantCulture,
            $"ok gc-pause ms={(p2 - p1).TotalMilliseconds:F1} build-ms={(p1 - p0).TotalMilliseconds:F1} " +
            $"wall-ms={wall.Elapsed.TotalMilliseconds:F1} nodes={nodes} no-gc-region={noGc}");
    }

    // The writer threads of `events` live on between commands: a thread that exits takes its
    // last dropped events out of the runtime's sequence points, so a reader could not count them.
    private static readonly List<BlockingCollection<Action>> EventWriters = new();

    private static void RunOnWriter(int t, Action work)
    {
        lock (EventWriters)
        {
            while (EventWriters.Count <= t)
            {
                var queue = new BlockingCollection<Action>();
                var thread = new Thread(() =>
                {
                    foreach (Action a in queue.GetConsumingEnumerable())
                    {
                        a();
                    }
                }) { IsBackground = true, Name = $"events-{EventWriters.Count}" };
                EventWriters.Add(queue);
                thread.Start();
            }
            EventWriters[t].Add(work);
        }
    }

    private static int EventsMark()
    {
        int n;
        lock (EventWriters)
        {
            n = EventWriters.Count;
        }
        using var done = new CountdownEvent(Math.Max(n, 1));
        if (n == 0)
        {
            done.Signal();
        }
        for (int t = 0; t < n; t++)
        {
            int id = t;
            RunOnWriter(t, () =>
            {
                TestAppEvents.Log.Blob(id, -1, "mark");
                done.Signal();
            });
        }
        done.Wait();
        return n;
    }

    // n events over `threads` threads, each taking indexes from one counter; paced per thread.
    private static void Events(int n, int chars, int threads, int mbps)
    {
        string text = new string('x', chars);
        long next = -1;
        // Bytes of text per event (UTF-16); a thread's share of the rate, in bytes per ms.
        double perMs = mbps > 0 ? mbps * 1024.0 * 1024.0 / 1000.0 / threads : 0;
        using var done = new CountdownEvent(threads);
        for (int t = 0; t < threads; t++)
        {
            int id = t;
            RunOnWriter(t, () =>
            {
                var sw = Stopwatch.StartNew();
                double sent = 0;
                long i;
                while ((i = Interlocked.Increment(ref next)) < n)
                {
                    TestAppEvents.Log.Blob(id, i, text);
                    sent += 2.0 * chars + 16;
                    if (perMs > 0)
                    {
                        double ahead = sent / perMs - sw.Elapsed.TotalMilliseconds;
                        if (ahead > 2)
                        {
                            Thread.Sleep((int)ahead);
                        }
                    }
                }
                done.Signal();
            });
        }
        done.Wait();
    }

    // rate × seconds lines, line k due at k / rate seconds from the start (sleeping when 2 ms or
    // more ahead), each stamped with the wall clock just before it is logged.
    private static long LogRate(int rate, int seconds, string run)
    {
        ILogger logger = s_loggerFactory.CreateLogger("TestApp.Bench");
        long n = (long)rate * seconds;
        var sw = Stopwatch.StartNew();
        for (long k = 0; k < n; k++)
        {
            double ahead = k * 1000.0 / rate - sw.Elapsed.TotalMilliseconds;
            if (ahead >= 2)
            {
                Thread.Sleep((int)ahead);
            }
            long unixNs = (DateTime.UtcNow.Ticks - DateTime.UnixEpoch.Ticks) * 100;
            logger.LogInformation(new EventId(6, "Bench"), "bench {Run} {Seq} {UnixNs}", run, k, unixNs);
        }
        return n;
    }

    // tick(i, ticks) for i = 0 .. ticks - 1, one every 100 ms for that many seconds (ticks =
    // 10 × seconds), or once (i = 0, ticks = 1) when seconds is 0.
    private static void EveryTick(int seconds, Action<int, int> tick)
    {
        int ticks = Math.Max(seconds * 10, 1);
        var sw = Stopwatch.StartNew();
        for (int i = 0; i < ticks; i++)
        {
            tick(i, ticks);
            int ahead = (i + 1) * 100 - (int)sw.ElapsedMilliseconds;
            if (seconds > 0 && ahead > 0)
            {
                Thread.Sleep(ahead);
            }
        }
    }

    // n meter-add steps spread evenly over the ticks of seconds; returns the steps so far.
    private static long MeterAdd(int n, int seconds)
    {
        long total = 0;
        EveryTick(seconds, (i, ticks) =>
            total = TestMetrics.Add((int)((long)n * (i + 1) / ticks - (long)n * i / ticks)));
        return total;
    }

    // Each value of batch recorded count times in testapp.latency on every tick of seconds;
    // returns the number of values recorded.
    private static long HistRecord(int seconds, List<(double Value, int Count)> batch)
    {
        long n = 0;
        EveryTick(seconds, (_, _) =>
        {
            foreach ((double value, int count) in batch)
            {
                TestMetrics.Record(value, count);
                n += count;
            }
        });
        return n;
    }

    // items thread-pool work items that all wait on one gate, opened after seconds: the pool's
    // threads block, the rest of the items stay queued (threadpool-queue-length). Returns the
    // largest ThreadPool.PendingWorkItemCount seen (sampled every 100 ms) once all items ran.
    private static long ThreadPoolBlock(int items, int seconds)
    {
        using var gate = new ManualResetEventSlim(false);
        using var done = new CountdownEvent(items);
        for (int i = 0; i < items; i++)
        {
            ThreadPool.UnsafeQueueUserWorkItem(_ =>
            {
                gate.Wait();
                done.Signal();
            }, null);
        }
        long max = 0;
        var sw = Stopwatch.StartNew();
        do
        {
            max = Math.Max(max, ThreadPool.PendingWorkItemCount);
            Thread.Sleep(100);
        } while (sw.ElapsedMilliseconds < seconds * 1000L);
        gate.Set();
        done.Wait();
        return max;
    }

    private static void Burn(int ms, int threads)
    {
        var workers = new Thread[threads];
        for (int t = 0; t < threads; t++)
        {
            workers[t] = new Thread(() => BurnCpu(ms)) { IsBackground = true, Name = $"burn-{t}" };
            workers[t].Start();
        }
        foreach (Thread w in workers)
        {
            w.Join();
        }
    }

    // A named, non-inlined frame so CPU samples have something recognisable to show.
    [MethodImpl(MethodImplOptions.NoInlining)]
    private static double BurnCpu(int ms)
    {
        var sw = Stopwatch.StartNew();
        double x = 1.0;
        while (sw.ElapsedMilliseconds < ms)
        {
            for (int i = 0; i < 10_000; i++)
            {
                x = Math.Sqrt(x + i) * 1.0000001;
            }
        }
        return x;
    }

    private static async Task Http(int port, int n, string path)
    {
        if (s_web == null)
        {
            var builder = WebApplication.CreateSlimBuilder(new WebApplicationOptions
            {
                Args = Array.Empty<string>(),
                ApplicationName = "TestApp",
                ContentRootPath = AppContext.BaseDirectory,
            });
            builder.Logging.ClearProviders();
            builder.Logging.SetMinimumLevel(LogLevel.Trace);
            builder.Logging.AddEventSourceLogger();
            builder.Services.AddSingleton<IHostLifetime, QuietLifetime>();
            builder.WebHost.ConfigureKestrel(o => o.Listen(IPAddress.Loopback, port));
            WebApplication web = builder.Build();
            web.MapGet("/", () => "hello from TestApp\n");
            web.MapGet("/slow", async (HttpContext ctx) =>
            {
                int.TryParse(ctx.Request.Query["ms"], NumberStyles.None, CultureInfo.InvariantCulture, out int ms);
                await Task.Delay(Math.Clamp(ms, 0, 600_000));
                await ctx.Response.WriteAsync("slow\n");
            });
            web.MapGet("/fail", (HttpContext ctx) =>
            {
                ctx.Response.StatusCode = StatusCodes.Status500InternalServerError;
                return Task.CompletedTask;
            });
            await web.StartAsync();
            var addresses = web.Services.GetRequiredService<IServer>().Features.Get<IServerAddressesFeature>();
            string first = addresses?.Addresses.FirstOrDefault() ?? throw new InvalidOperationException("no address");
            s_webPort = new Uri(first).Port;
            s_web = web;
        }

        using var client = new HttpClient { BaseAddress = new Uri($"http://127.0.0.1:{s_webPort}/") };
        for (int i = 0; i < n; i++)
        {
            using HttpResponseMessage resp = await client.GetAsync(path);
            if (path == "/")
            {
                resp.EnsureSuccessStatusCode();
            }
            await resp.Content.ReadAsStringAsync();
        }
    }

    private static void Heartbeat(ILogger logger)
    {
        long n = Interlocked.Increment(ref s_heartbeats);
        // A little garbage each beat (64 KiB in small objects) so GCs happen on their own.
        var garbage = new List<object>(256);
        for (int i = 0; i < 256; i++)
        {
            garbage.Add(new byte[232]);
        }
        s_sink = garbage;
        int held;
        lock (Held)
        {
            held = Held.Count;
        }
        logger.LogInformation(new EventId(2, "Heartbeat"), "Heartbeat {Count} heldMB={HeldMB}", n, held);
    }

    // Keeps the web host from hooking Ctrl+C / SIGTERM: the app handles those itself.
    private sealed class QuietLifetime : IHostLifetime
    {
        public Task WaitForStartAsync(CancellationToken cancellationToken) => Task.CompletedTask;

        public Task StopAsync(CancellationToken cancellationToken) => Task.CompletedTask;
    }
}

// The events of the `events` command: a heavy, countable stream for the trace relay tests.
[EventSource(Name = "DotMon-TestApp")]
internal sealed class TestAppEvents : EventSource
{
    public static readonly TestAppEvents Log = new();

    [Event(1, Level = EventLevel.Informational)]
    public void Blob(int Thread, long Index, string Text) => WriteEvent(1, Thread, Index, Text);
}

// System.Diagnostics.Metrics instruments of the `meter-add` command (see the header for values).
internal static class TestMetrics
{
    private static readonly object Lock = new();
    private static Meter? s_meter;
    private static Counter<long>? s_requests;
    private static Histogram<double>? s_latency;
    private static UpDownCounter<long>? s_depth;
    private static long s_steps;

    public static void Init()
    {
        lock (Lock)
        {
            if (s_meter != null)
            {
                return;
            }
            s_meter = new Meter(new MeterOptions("TestApp.Meter")
            {
                Version = "1.0.0",
                Tags = new[] { new KeyValuePair<string, object?>("app", "testapp") },
            });
            s_requests = s_meter.CreateCounter<long>("testapp.requests", "{request}",
                "Requests counted by meter-add", new[] { new KeyValuePair<string, object?>("tier", "test") });
            s_latency = s_meter.CreateHistogram<double>("testapp.latency", "ms", "Latency recorded by meter-add");
            s_depth = s_meter.CreateUpDownCounter<long>("testapp.queue.depth", "{item}", "meter-add steps mod 10");
            s_meter.CreateObservableGauge("testapp.temperature",
                () => 20.0 + (Interlocked.Read(ref s_steps) % 10) / 2.0, "Cel", "20 + (steps mod 10) / 2");
        }
    }

    // n steps; returns the number of steps so far (= testapp.requests' total).
    public static long Add(int n)
    {
        Init();
        lock (Lock)
        {
            for (int i = 0; i < n; i++)
            {
                long k = ++s_steps;
                var tags = new TagList { { "code", 200 }, { "route", k % 2 == 1 ? "/a" : "/b" } };
                s_requests!.Add(1, tags);
                s_latency!.Record(k % 10 + 0.5);
                s_depth!.Add(k % 10 == 0 ? -9 : 1); // depth = k mod 10
            }
            return s_steps;
        }
    }

    // value recorded count times in testapp.latency (the `hist-record` command).
    public static void Record(double value, int count)
    {
        Init();
        for (int i = 0; i < count; i++)
        {
            s_latency!.Record(value);
        }
    }
}

// EventCounters of the `counters-add` command (see the header for values).
[EventSource(Name = "TestApp.Counters")]
internal sealed class TestAppCounters : EventSource
{
    public static readonly TestAppCounters Log = new();

    private readonly object _lock = new();
    private readonly EventCounter _workTime;
    private readonly IncrementingEventCounter _ops;
    private readonly PollingCounter _queueLength;
    private readonly IncrementingPollingCounter _totalOps;
    private long _steps;

    private TestAppCounters()
    {
        _workTime = new EventCounter("work-time", this) { DisplayName = "Work Time", DisplayUnits = "ms" };
        _ops = new IncrementingEventCounter("ops", this)
        {
            DisplayName = "Operations",
            DisplayRateTimeScale = TimeSpan.FromSeconds(1),
        };
        _queueLength = new PollingCounter("queue-length", this, () => Interlocked.Read(ref _steps) % 10)
        {
            DisplayName = "Queue Length",
        };
        _totalOps = new IncrementingPollingCounter("total-ops", this, () => Interlocked.Read(ref _steps))
        {
            DisplayName = "Total Operations",
            DisplayRateTimeScale = TimeSpan.FromSeconds(1),
        };
        foreach (DiagnosticCounter c in new DiagnosticCounter[] { _workTime, _ops, _queueLength, _totalOps })
        {
            c.AddMetadata("source", "testapp");
        }
    }

    // n steps; returns the number of steps so far.
    public long Add(int n)
    {
        lock (_lock)
        {
            for (int i = 0; i < n; i++)
            {
                long k = Interlocked.Increment(ref _steps);
                _workTime.WriteMetric(k % 10 + 1);
                _ops.Increment(1);
            }
            return Interlocked.Read(ref _steps);
        }
    }

    protected override void Dispose(bool disposing)
    {
        _workTime.Dispose();
        _ops.Dispose();
        _queueLength.Dispose();
        _totalOps.Dispose();
        base.Dispose(disposing);
    }
}

// What heap-graph holds (see the protocol at the top): distinctive for heap snapshots.
internal sealed class GcDumpHolder
{
    private static List<GcDumpHolder>? s_rooted;
    private static GCHandle s_handle;

    private readonly byte[][] _arrays;

    private GcDumpHolder(int m, int size)
    {
        _arrays = new byte[m][];
        for (int i = 0; i < m; i++)
        {
            _arrays[i] = new byte[size];
        }
    }

    public int Count => _arrays.Length;

    public static void Build(int n, int m, int size)
    {
        Free();
        var list = new List<GcDumpHolder>(n);
        for (int i = 0; i < n; i++)
        {
            list.Add(new GcDumpHolder(m, size));
        }
        s_rooted = list;
        s_handle = GCHandle.Alloc(new GcDumpHolder(m, size), GCHandleType.Normal);
    }

    public static void Free()
    {
        s_rooted = null;
        if (s_handle.IsAllocated)
        {
            s_handle.Free();
        }
    }
}

// `hot <ms>`: a known CPU split on one thread, 7 ms of every 10 in SpinHotLoop and 3 in
// SpinWarmLoop, so a CPU profile's top exclusive frame and its share are known in advance.
// The clock is read only every few thousand iterations, so the loops' own frames are the
// leaves of nearly every sample.
internal static class Hot
{
    private const int RoundMs = 10;
    private const int HotMs = 7;

    public static string Run(int ms)
    {
        long freq = Stopwatch.Frequency;
        long start = Stopwatch.GetTimestamp();
        long end = start + ms * freq / 1000;
        long hotTicks = 0, warmTicks = 0;
        double x = 1.0;
        while (Stopwatch.GetTimestamp() < end)
        {
            long t0 = Stopwatch.GetTimestamp();
            x = SpinHotLoop(t0 + HotMs * freq / 1000, x);
            long t1 = Stopwatch.GetTimestamp();
            x = SpinWarmLoop(t1 + (RoundMs - HotMs) * freq / 1000, x);
            long t2 = Stopwatch.GetTimestamp();
            hotTicks += t1 - t0;
            warmTicks += t2 - t1;
        }
        return $"ok hot hot-ms={hotTicks * 1000 / freq} warm-ms={warmTicks * 1000 / freq} x={(x > 0 ? 1 : 0)}";
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static double SpinHotLoop(long until, double x)
    {
        while (Stopwatch.GetTimestamp() < until)
        {
            for (int i = 0; i < 4000; i++)
            {
                x = Math.Sqrt(x + i) * 1.0000001;
            }
        }
        return x;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static double SpinWarmLoop(long until, double x)
    {
        while (Stopwatch.GetTimestamp() < until)
        {
            for (int i = 0; i < 4000; i++)
            {
                x = Math.Sqrt(x + i) * 0.9999999;
            }
        }
        return x;
    }
}

// GET /profile's kinds (tests/speedscope/check_profile_kinds.py): known allocations, exceptions
// and lock waits, each from a method of its own so that the profile can name it.
internal static class ProfileKinds
{
    private static readonly object s_lock = new();
    private static object? s_keep;

    public static string AllocMix(int ms)
    {
        long end = Stopwatch.GetTimestamp() + ms * Stopwatch.Frequency / 1000;
        long rounds = 0;
        var ring = new object[256];
        while (Stopwatch.GetTimestamp() < end)
        {
            for (int i = 0; i < 64; i++, rounds++)
            {
                ring[rounds & 255] = AllocateBig(rounds);
                ring[(rounds + 128) & 255] = AllocateSmall(rounds);
            }
        }
        s_keep = ring[0];
        return $"ok alloc-mix rounds={rounds}";
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static BigAllocType AllocateBig(long i) => new BigAllocType((byte)i);

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int[] AllocateSmall(long i) => new int[8] { (int)i, 1, 2, 3, 4, 5, 6, 7 };

    public static string ThrowN(int n)
    {
        for (int i = 0; i < n; i++)
        {
            try
            {
                ThrowKnown(i);
            }
            catch (ProfileKindsException)
            {
                // Expected: the profile counts them as thrown.
            }
        }
        return $"ok throw-n count={n}";
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void ThrowKnown(int i) => throw new ProfileKindsException($"known exception {i}");

    public static string Contend(int ms, int threads)
    {
        long end = Stopwatch.GetTimestamp() + ms * Stopwatch.Frequency / 1000;
        long entered = 0;
        var all = new Thread[threads];
        for (int t = 0; t < threads; t++)
        {
            all[t] = new Thread(() =>
            {
                while (Stopwatch.GetTimestamp() < end)
                {
                    Interlocked.Add(ref entered, HoldLock(2));
                }
            }) { IsBackground = true, Name = $"contend-{t}" };
            all[t].Start();
        }
        foreach (Thread t in all)
        {
            t.Join();
        }
        return $"ok contend entered={entered}";
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int HoldLock(int holdMs)
    {
        lock (s_lock)
        {
            long until = Stopwatch.GetTimestamp() + holdMs * Stopwatch.Frequency / 1000;
            while (Stopwatch.GetTimestamp() < until)
            {
                Thread.SpinWait(20);
            }
            return 1;
        }
    }

    public static bool Kept => s_keep != null;
}

// About 1000 bytes of its own, so that it dominates alloc-mix by bytes.
internal sealed class BigAllocType
{
    private BigAllocBuffer _data;

    public BigAllocType(byte b)
    {
        _data[0] = b;
    }

    public byte First => _data[0];
}

[InlineArray(1000)]
internal struct BigAllocBuffer
{
    private byte _element0;
}

internal sealed class ProfileKindsException : Exception
{
    public ProfileKindsException(string message) : base(message)
    {
    }
}

// `hot-threads`: many threads whose stacks keep changing, for a large CPU trace.
internal static class Deep
{
    private static volatile bool s_stop;

    public static string Run(int threads, int ms)
    {
        s_stop = false;
        long rounds = 0;
        var workers = new Thread[threads];
        for (int t = 0; t < threads; t++)
        {
            int id = t;
            workers[t] = new Thread(() =>
            {
                long r = 0;
                while (!s_stop)
                {
                    A(4 + (int)((id * 7 + r) % 24), (uint)(id * 2654435761u + r * 40503u));
                    r++;
                }
                Interlocked.Add(ref rounds, r);
            }) { IsBackground = true, Name = $"deep-{t}" };
            workers[t].Start();
        }
        string hot = Hot.Run(ms);
        s_stop = true;
        foreach (Thread w in workers)
        {
            w.Join();
        }
        return $"{hot} threads={threads} rounds={Interlocked.Read(ref rounds)}";
    }

    // Three frames that call one another; which one comes next depends on a bit of `path`, so
    // the same thread and depth give a different stack from one round to the next.
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int A(int depth, uint path) => depth == 0 ? Bottom() : ((path >> depth & 1) == 0 ? B(depth - 1, path) : C(depth - 1, path)) + 1;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int B(int depth, uint path) => depth == 0 ? Bottom() : ((path >> depth & 1) == 0 ? C(depth - 1, path) : A(depth - 1, path)) + 1;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int C(int depth, uint path) => depth == 0 ? Bottom() : ((path >> depth & 1) == 0 ? A(depth - 1, path) : B(depth - 1, path)) + 1;

    [MethodImpl(MethodImplOptions.NoInlining)]
    private static int Bottom()
    {
        Thread.Sleep(1);
        return 0;
    }
}
