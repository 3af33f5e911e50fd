// SPDX-License-Identifier: MIT
//
// OtelApp: the .NET process of issue 33's tests (tests/otel). It produces the three signals an
// OpenTelemetry pipeline carries, through .NET's own APIs only:
//   logs     ILogger, category DotmonTest.OTel.Work: structured templates, a scope with key/values,
//            an exception;
//   metrics  Meter "DotmonTest.OTel": a counter, an up-down counter, an observable gauge and a
//            histogram, all with tags;
//   traces   ActivitySource "DotmonTest.OTel": a parent and a child span with tags and a status,
//            inside the ASP.NET Core request span, and an HttpClient call to the app's own /echo
//            (an HttpClient client span and a second ASP.NET Core server span in the same trace).
//
// Environment:
//   OTEL_APP_PORT   the port Kestrel listens on at 127.0.0.1 (0 or unset: any free port)
//   OTEL_TEST_SDK   1: the OpenTelemetry .NET SDK in this process exports logs, metrics and traces
//                   with its OTLP exporter, configured by the standard OTEL_* variables
//                   (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL, OTEL_SERVICE_NAME,
//                   OTEL_METRIC_EXPORT_INTERVAL, OTEL_BSP_SCHEDULE_DELAY, ...); anything else: no
//                   exporter, the telemetry is only there for an observer outside the process.
//   OTEL_TEST_LOG_FORMATTED
//                   0: the SDK's log bodies are the message templates ("Work {OrderId} started
//                   for {Customer}"); otherwise the formatted messages ("Work 7 started for alice")
//                   with the template in the attribute {OriginalFormat}.
//
// stdout: one line "ready pid=<pid> url=<base URL> sdk=<0|1>" once Kestrel listens; nothing else
// (the console logger is off). SIGTERM/SIGINT: the host stops (the SDK, when on, flushes).
//
// HTTP:
//   GET /health        200 "ok"
//   GET /work?id=N     one known set of telemetry (below); answers JSON with the ids it created:
//                      {"traceId","requestSpanId","parentSpanId","childSpanId","echoSpanId",
//                       "echoParentSpanId","id","logs","sdk"} (ids null where no Activity was
//                      created: no listener in or out of the process)
//   GET /echo?id=N     logs one record, answers {"traceId","spanId","parentSpanId"} of its
//                      request's Activity
//   GET /await?id=N    one record logged after an await inside a scope, its continuation on
//                      another thread (see AfterAwait); answers {"traceId"} of its request
//   GET /items?n=N&rate=R&kind=K
//                      N items at about R per second (0: unpaced), for the benchmark's per-item
//                      cost; K (default plain) adds an await, an exception or an HTTP call to each
//                      (see Items); answers {"n","ms"} when done
//   GET /metrics-state the values the instruments hold so far, for comparisons:
//                      {"requests","openOrders","lastOrder","histogramCount","histogramSum"}
//
// One /work?id=N produces, in this order:
//   counter   dotmontest.requests        +1, tag route=/work (unit {request})
//   up-down   dotmontest.open_orders     +2 then -1, tag tenant=contoso (unit {order})
//   span      work.parent (Internal), tags order.id=N, work.kind=test; status Ok at the end
//   log       Information, EventId 10 WorkStarted, "Work {OrderId} started for {Customer}"
//             (OrderId=N, Customer=alice), inside the scope {OrderId=N, Tenant=contoso}
//   span      work.child (Client) under work.parent, tag step=1, status Error "step failed";
//             inside it the HttpClient GET /echo?id=N (client span, then the server span of /echo
//             and its log: Information, EventId 12 Echo, "Echo {OrderId}")
//   log       Error, EventId 11 WorkFailed, "Work {OrderId} failed" with an
//             InvalidOperationException "work N failed on purpose", inside the scope
//   histogram dotmontest.work_size       10 * (N % 5 + 1), tag route=/work (unit By)
//   gauge     dotmontest.last_order      observes N (tag tenant=contoso) from then on

using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Diagnostics.Metrics;
using System.Linq;
using System.Net.Http;
using System.Text.Json;
using System.Threading;
using System.Threading.Tasks;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Hosting;
using Microsoft.Extensions.Logging;
using OpenTelemetry;
using OpenTelemetry.Logs;
using OpenTelemetry.Metrics;
using OpenTelemetry.Trace;

namespace OtelApp;

public static class Program
{
    public const string Name = "DotmonTest.OTel";

    private static readonly ActivitySource Source = new(Name, "1.0.0");
    private static readonly Meter Meter = new(Name, "1.0.0");
    private static readonly Counter<long> Requests =
        Meter.CreateCounter<long>("dotmontest.requests", "{request}", "Requests to /work");
    private static readonly UpDownCounter<long> OpenOrders =
        Meter.CreateUpDownCounter<long>("dotmontest.open_orders", "{order}", "Orders opened and not yet closed");
    private static readonly Histogram<double> WorkSize =
        Meter.CreateHistogram<double>("dotmontest.work_size", "By", "Size of each piece of work");

    private static readonly Counter<long> ItemsDone =
        Meter.CreateCounter<long>("dotmontest.items", "{item}", "Items done by /items");
    private static readonly Histogram<double> ItemSize =
        Meter.CreateHistogram<double>("dotmontest.item_size", "By", "Size of each item of /items");

    private static long _requests;
    private static long _openOrders;
    private static long _lastOrder;
    private static long _histogramCount;
    private static double _histogramSum;
    private static readonly object Gate = new();

    public static async Task<int> Main(string[] args)
    {
        bool sdk = Environment.GetEnvironmentVariable("OTEL_TEST_SDK") == "1";
        bool formatted = Environment.GetEnvironmentVariable("OTEL_TEST_LOG_FORMATTED") != "0";
        // The SDK's IncludeScopes (its own default is false); on unless OTEL_TEST_INCLUDE_SCOPES=0.
        bool scopes = Environment.GetEnvironmentVariable("OTEL_TEST_INCLUDE_SCOPES") != "0";
        string port = Environment.GetEnvironmentVariable("OTEL_APP_PORT") ?? "0";
        if (string.IsNullOrEmpty(port))
        {
            port = "0";
        }

        Meter.CreateObservableGauge("dotmontest.last_order", ObserveLastOrder, "{order}", "The last order id worked on");

        var builder = WebApplication.CreateSlimBuilder(args);
        builder.WebHost.UseUrls($"http://127.0.0.1:{port}");
        builder.Logging.ClearProviders();
        // What dotmon reads out of process (the Microsoft-Extensions-Logging EventSource).
        builder.Logging.AddEventSourceLogger();
        builder.Logging.SetMinimumLevel(LogLevel.Information);
        // ASP.NET Core's and HttpClient's own Information records (request started/finished...)
        // are left out so that both observers see the app's records only.
        builder.Logging.AddFilter("Microsoft", LogLevel.Warning);
        builder.Logging.AddFilter("System", LogLevel.Warning);
        builder.Services.AddHttpClient();

        if (sdk)
        {
            builder.Services.AddOpenTelemetry()
                .WithTracing(t => t.AddSource(Name).AddAspNetCoreInstrumentation().AddHttpClientInstrumentation())
                .WithMetrics(m => m.AddMeter(Name))
                .WithLogging(null, o =>
                {
                    o.IncludeScopes = scopes;
                    o.IncludeFormattedMessage = formatted;
                })
                .UseOtlpExporter();
        }

        var app = builder.Build();
        var log = app.Services.GetRequiredService<ILoggerFactory>().CreateLogger(Name + ".Work");
        var http = app.Services.GetRequiredService<IHttpClientFactory>();
        string self = "";

        app.MapGet("/health", () => "ok");
        app.MapGet("/echo", (int id) =>
        {
            Activity? a = Activity.Current;
            log.LogInformation(new EventId(12, "Echo"), "Echo {OrderId}", id);
            return Results.Json(new Dictionary<string, string?>
            {
                ["traceId"] = a?.TraceId.ToHexString(),
                ["spanId"] = a?.SpanId.ToHexString(),
                ["parentSpanId"] = a?.ParentSpanId.ToHexString(),
            });
        });
        app.MapGet("/work", async (int id) => Results.Json(await Work(id, log, http, self)));
        app.MapGet("/await", (int id) => Results.Json(AfterAwait(id, log)));
        app.MapGet("/items", async (int n, int rate, string? kind) =>
            Results.Json(await Items(n, rate, kind ?? "plain", log, http, self)));
        // For bench/bench_otel.py: what the app allocated and paused for, whichever exporter runs.
        app.MapGet("/gc-state", () => Results.Json(new Dictionary<string, double>
        {
            ["allocatedBytes"] = GC.GetTotalAllocatedBytes(false),
            ["pauseMs"] = GC.GetTotalPauseDuration().TotalMilliseconds,
            ["gen0"] = GC.CollectionCount(0),
            ["gen1"] = GC.CollectionCount(1),
            ["gen2"] = GC.CollectionCount(2),
        }));
        app.MapGet("/metrics-state", () =>
        {
            lock (Gate)
            {
                return Results.Json(new Dictionary<string, double>
                {
                    ["requests"] = _requests,
                    ["openOrders"] = _openOrders,
                    ["lastOrder"] = _lastOrder,
                    ["histogramCount"] = _histogramCount,
                    ["histogramSum"] = _histogramSum,
                });
            }
        });

        await app.StartAsync();
        self = app.Urls.First();
        Console.Out.WriteLine($"ready pid={Environment.ProcessId} url={self} sdk={(sdk ? 1 : 0)}");
        Console.Out.Flush();
        await app.WaitForShutdownAsync();
        await app.DisposeAsync();
        return 0;
    }

    private static IEnumerable<Measurement<long>> ObserveLastOrder()
    {
        long v = Interlocked.Read(ref _lastOrder);
        if (v == 0)
        {
            return Array.Empty<Measurement<long>>();
        }
        return new[] { new Measurement<long>(v, new KeyValuePair<string, object?>("tenant", "contoso")) };
    }

    // A record logged after an await inside a scope, in the order that puts it in the runtime's
    // stream before its scope's start: thread B writes an event first (a scope opened and closed:
    // in the session, never exported), then a new thread A, with nothing written yet, opens the
    // scope {OrderId=N, Step=await} and awaits a task that B then completes, so the continuation
    // runs on B: it logs Information, EventId 13 AfterAwait, "After the await {OrderId}" and
    // closes the scope. The runtime writes each thread's events together, the thread with the
    // oldest event first: B's (the record among them) before A's (the scope's start).
    private static Dictionary<string, object?> AfterAwait(int id, ILogger log)
    {
        var resume = new TaskCompletionSource(); // its continuations run on the completing thread
        Task? body = null;
        var b = new Thread(() =>
        {
            using (log.BeginScope(new List<KeyValuePair<string, object?>> { new("Before", id) }))
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
        return new Dictionary<string, object?> { ["traceId"] = Activity.Current?.TraceId.ToHexString() };

        async Task Body()
        {
            var scope = new List<KeyValuePair<string, object?>> { new("OrderId", id), new("Step", "await") };
            using (log.BeginScope(scope))
            {
                await resume.Task;
                log.LogInformation(new EventId(13, "AfterAwait"), "After the await {OrderId}", id);
            }
        }
    }

    // n items at about rate per second (0: as fast as it goes), each its own trace: a scope
    // {ItemId=i}, in it the span items.parent (tag item=i) with a child span items.child, and one
    // record (Information, EventId 14 Item, "Item {ItemId} done for {Customer}"); then the counter
    // dotmontest.items +1 and the histogram dotmontest.item_size (i % 100), tag kind=item. No
    // HTTP, no exception: what an exporter costs the app per item, with little else in the
    // process's CPU. kind adds one of what a /work request has beside that, to see its own cost:
    //   plain      nothing (the item above)
    //   async      two awaits inside the child span (Task.Yield: the rest runs on a pool thread)
    //   exception  a caught InvalidOperationException logged (Error, EventId 15 ItemFailed) in the
    //              scope
    //   http       an HttpClient GET of the app's own /health inside the child span (a client span
    //              and the server's ASP.NET Core request span)
    private static async Task<Dictionary<string, object?>> Items(int n, int rate, string kind, ILogger log,
                                                                 IHttpClientFactory http, string self)
    {
        if (kind is not ("plain" or "async" or "exception" or "http"))
        {
            throw new ArgumentException($"unknown kind {kind}");
        }
        Activity.Current = null; // the request's span is not their parent
        using HttpClient client = http.CreateClient();
        var clock = Stopwatch.StartNew();
        for (int i = 0; i < n; i++)
        {
            using (log.BeginScope(new List<KeyValuePair<string, object?>> { new("ItemId", i) }))
            using (Activity? parent = Source.StartActivity("items.parent", ActivityKind.Internal))
            {
                parent?.SetTag("item", i);
                using (Activity? child = Source.StartActivity("items.child", ActivityKind.Client))
                {
                    child?.SetTag("step", 1);
                    if (kind == "async")
                    {
                        await Task.Yield();
                        await Task.Yield();
                    }
                    else if (kind == "http")
                    {
                        await client.GetStringAsync($"{self}/health");
                    }
                }
                if (kind == "exception")
                {
                    try
                    {
                        throw new InvalidOperationException($"item {i} failed on purpose");
                    }
                    catch (InvalidOperationException ex)
                    {
                        log.LogError(new EventId(15, "ItemFailed"), ex, "Item {ItemId} failed", i);
                    }
                }
                log.LogInformation(new EventId(14, "Item"), "Item {ItemId} done for {Customer}", i, "alice");
            }
            ItemsDone.Add(1, new KeyValuePair<string, object?>("kind", "item"));
            ItemSize.Record(i % 100, new KeyValuePair<string, object?>("kind", "item"));
            if (rate > 0 && (i + 1) % 50 == 0)
            {
                long due = (long)((i + 1) * 1000.0 / rate) - clock.ElapsedMilliseconds;
                if (due > 0)
                {
                    Thread.Sleep((int)due);
                }
            }
        }
        return new Dictionary<string, object?> { ["n"] = n, ["ms"] = clock.Elapsed.TotalMilliseconds };
    }

    private static async Task<Dictionary<string, object?>> Work(int id, ILogger log, IHttpClientFactory http, string self)
    {
        var answer = new Dictionary<string, object?>
        {
            ["id"] = id,
            ["requestSpanId"] = Activity.Current?.SpanId.ToHexString(),
        };
        Requests.Add(1, new KeyValuePair<string, object?>("route", "/work"));
        OpenOrders.Add(2, new KeyValuePair<string, object?>("tenant", "contoso"));
        OpenOrders.Add(-1, new KeyValuePair<string, object?>("tenant", "contoso"));

        // A list of key/values (not a Dictionary): the EventSource logger dotmon reads serializes
        // only scopes that are IReadOnlyList<KeyValuePair<string, object?>> (a Dictionary scope
        // reaches it as {}), while the in-process SDK reads any of them.
        var scope = new List<KeyValuePair<string, object?>> { new("OrderId", id), new("Tenant", "contoso") };
        using (log.BeginScope(scope))
        using (Activity? parent = Source.StartActivity("work.parent", ActivityKind.Internal))
        {
            parent?.SetTag("order.id", id);
            parent?.SetTag("work.kind", "test");
            answer["traceId"] = (parent ?? Activity.Current)?.TraceId.ToHexString();
            answer["parentSpanId"] = parent?.SpanId.ToHexString();
            log.LogInformation(new EventId(10, "WorkStarted"), "Work {OrderId} started for {Customer}", id, "alice");

            using (Activity? child = Source.StartActivity("work.child", ActivityKind.Client))
            {
                child?.SetTag("step", 1);
                answer["childSpanId"] = child?.SpanId.ToHexString();
                using HttpClient client = http.CreateClient();
                string body = await client.GetStringAsync($"{self}/echo?id={id}");
                var echo = JsonSerializer.Deserialize<Dictionary<string, string?>>(body);
                answer["echoSpanId"] = echo?.GetValueOrDefault("spanId");
                answer["echoParentSpanId"] = echo?.GetValueOrDefault("parentSpanId");
                child?.SetStatus(ActivityStatusCode.Error, "step failed");
            }

            try
            {
                throw new InvalidOperationException($"work {id} failed on purpose");
            }
            catch (InvalidOperationException ex)
            {
                log.LogError(new EventId(11, "WorkFailed"), ex, "Work {OrderId} failed", id);
            }
            parent?.SetStatus(ActivityStatusCode.Ok);
        }

        double size = 10 * (id % 5 + 1);
        WorkSize.Record(size, new KeyValuePair<string, object?>("route", "/work"));
        lock (Gate)
        {
            _requests++;
            _openOrders++;
            _histogramCount++;
            _histogramSum += size;
        }
        Interlocked.Exchange(ref _lastOrder, id);
        answer["logs"] = 3;
        answer["sdk"] = Environment.GetEnvironmentVariable("OTEL_TEST_SDK") == "1";
        return answer;
    }
}
