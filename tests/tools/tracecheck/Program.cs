// SPDX-License-Identifier: MIT
//
// tracecheck: an independent nettrace reader for dotmon's tests, built on Microsoft's TraceEvent
// (EventPipeEventSource), the library PerfView and dotnet-trace use. It reads the whole file,
// dispatches every event and prints one JSON line:
//
//   {"ok":true,"events":N,"lost":M,"providers":{"name":count,...},"gcStart":n,"gcEnd":n,
//    "sampleProfiler":n,"logMessages":n,"pid":n,"pointerSize":n,"found":{"text":n,...}}
//
// gcStart/gcEnd: Microsoft-Windows-DotNETRuntime event ids 1/2; sampleProfiler:
// Microsoft-DotNETCore-SampleProfiler id 0; logMessages: Microsoft-Extensions-Logging events named
// FormattedMessage, Message or MessageJson (by name: their ids changed between runtime versions,
// e.g. 9 and 10 on .NET 10 against 1 and 5 earlier). "found" counts, for each --find TEXT, the
// events whose raw payload contains TEXT encoded as UTF-16LE (how EventSource strings are stored).
//
// With --by-event, "byEvent":{"provider#eventId":count,...} counts events per provider and id.
// With --gc-events, "gcEvents":[[Count,Depth,Reason,Type],...] lists every GCStart's payload as
// TraceEvent decodes it (GCStartTraceData), in stream order, and "gcSpans":[[Count,startTicks,
// endTicks],...] each GCEnd with its GCStart's timestamp (UTC .NET ticks as --times; 0 when the
// GCStart is not in the trace).
// With --activities, "activities":[["provider#eventId","activityId","relatedActivityId"],...] lists
// every event with a non-empty ActivityID or RelatedActivityID (empty ones as "").
// With --dynamic-names, "dynamicNames":{"provider|EventName":count,...} counts the events a second
// pass sees with only TraceEvent's dynamic parser subscribed, by the EventName it gives them: what
// dotnet-monitor's EventMonitor (CollectTrace's StoppingEvent) matches EventName against. Native
// runtime events are "EventID(N)" there (only the CLR parser, not subscribed, has their names).
// With --payloads KEYS (a comma list of provider#eventId, e.g.
// Microsoft-Windows-DotNETRuntime#10), "payloads":{"provider#eventId":[{"Field":value,...},...]}
// lists, in stream order, the fields TraceEvent's parser decodes for each such event
// (PayloadNames/PayloadValue): integers and enums as numbers, strings, GUIDs as "d" strings,
// Boolean, doubles, byte arrays as lowercase hex; other values (arrays, structs) are left out.
// With --times, "firstTimeUtcTicks" and "lastTimeUtcTicks" are the earliest and latest event
// timestamps as TraceEvent converts them (TimeStamp in UTC, .NET DateTime ticks; 0 without events).
//
// With --gcdump FILE [--gcdump-dll DLL], the file is a .gcdump instead, read with the GCHeapDump
// reader (PerfView's FastSerialization GCHeapDump + MemoryGraph). TraceEvent's package does not
// carry that class; the dotnet-gcdump tool's own assembly does (namespace-less GCHeapDump, Graphs
// MemoryGraph), so it is loaded from DLL (or $DOTMON_GCDUMP_DLL: the tool's dotnet-gcdump.dll) in
// a load context of its own and driven by reflection. It prints
//
//   {"ok":true,"nodes":N,"types":T,"totalSize":S,"creationTool":"…","byType":{"name":[count,size]}}
//
// nodes = NodeIndexLimit, types = NodeTypeIndexLimit, byType the nodes per type name with their
// sizes (every node, the pseudo-nodes of roots included).
//
// usage: tracecheck FILE [--by-event] [--gc-events] [--activities] [--dynamic-names] [--times]
//        [--payloads KEYS] [--find TEXT]...
// Exit status: 0 read completely; 1 TraceEvent threw (the JSON then has "ok":false,"error":...);
// 2 usage or file not found.

using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Reflection;
using System.Runtime.Loader;
using System.Text;
using System.Text.Json;
using Microsoft.Diagnostics.Tracing;
using Microsoft.Diagnostics.Tracing.EventPipe;
using Microsoft.Diagnostics.Tracing.Parsers;
using Microsoft.Diagnostics.Tracing.Parsers.Clr;

namespace TraceCheck;

internal static class Program
{
    private const string Runtime = "Microsoft-Windows-DotNETRuntime";
    private const string SampleProfiler = "Microsoft-DotNETCore-SampleProfiler";
    private const string Logging = "Microsoft-Extensions-Logging";

    private static int Main(string[] args)
    {
        if (args.Length >= 2 && args[0] == "--gcdump")
        {
            string? dll = Environment.GetEnvironmentVariable("DOTMON_GCDUMP_DLL");
            if (args.Length >= 4 && args[2] == "--gcdump-dll")
            {
                dll = args[3];
            }
            return GcDump(args[1], dll);
        }
        string? path = null;
        var finds = new List<string>();
        bool byEvent = false;
        bool gcEvents = false;
        bool activities = false;
        bool dynamicNames = false;
        var dynNames = new SortedDictionary<string, long>(StringComparer.Ordinal);
        bool times = false;
        long firstTicks = long.MaxValue, lastTicks = long.MinValue;
        var actList = new List<string[]>();
        var gcList = new List<int[]>();
        var gcSpans = new List<long[]>();
        var gcStarts = new Dictionary<int, long>();
        var payloadKeys = new HashSet<string>(StringComparer.Ordinal);
        var payloads = new SortedDictionary<string, List<List<KeyValuePair<string, object?>>>>(StringComparer.Ordinal);
        for (int i = 0; i < args.Length; i++)
        {
            if (args[i] == "--find" && i + 1 < args.Length)
            {
                finds.Add(args[++i]);
            }
            else if (args[i] == "--by-event")
            {
                byEvent = true;
            }
            else if (args[i] == "--gc-events")
            {
                gcEvents = true;
            }
            else if (args[i] == "--activities")
            {
                activities = true;
            }
            else if (args[i] == "--dynamic-names")
            {
                dynamicNames = true;
            }
            else if (args[i] == "--times")
            {
                times = true;
            }
            else if (args[i] == "--payloads" && i + 1 < args.Length)
            {
                foreach (string k in args[++i].Split(',', StringSplitOptions.RemoveEmptyEntries))
                {
                    payloadKeys.Add(k);
                    payloads[k] = new List<List<KeyValuePair<string, object?>>>();
                }
            }
            else if (path == null)
            {
                path = args[i];
            }
            else
            {
                return Usage();
            }
        }
        if (path == null)
        {
            return Usage();
        }
        if (!File.Exists(path))
        {
            Console.Error.WriteLine($"tracecheck: {path}: no such file");
            return 2;
        }

        long events = 0, gcStart = 0, gcEnd = 0, samples = 0, logs = 0;
        var providers = new SortedDictionary<string, long>(StringComparer.Ordinal);
        var perEvent = new SortedDictionary<string, long>(StringComparer.Ordinal);
        var patterns = new List<byte[]>();
        foreach (string f in finds)
        {
            patterns.Add(Encoding.Unicode.GetBytes(f));
        }
        var found = new long[finds.Count];
        int lost = 0, pid = 0, pointerSize = 0;
        string? error = null;

        try
        {
            using var source = new EventPipeEventSource(path);
            // Without parsers every event is "unhandled" and named Provider(guid). The CLR parser
            // knows the runtime's native events; the dynamic one builds templates from the
            // trace's own metadata (EventSource events such as logging).
            source.Clr.All += _ => { };
            source.Dynamic.All += _ => { };
            // The rundown and private providers have parsers of their own (field names and
            // values for --payloads; without them their events are only counted).
            new ClrRundownTraceEventParser(source).All += _ => { };
            new ClrPrivateTraceEventParser(source).All += _ => { };
            new SampleProfilerTraceEventParser(source).All += _ => { };
            source.AllEvents += e =>
            {
                events++;
                pid = e.ProcessID; // the Trace object's pid, stamped on every event
                string provider = e.ProviderName ?? "";
                providers[provider] = providers.TryGetValue(provider, out long c) ? c + 1 : 1;
                int id = (int)e.ID;
                if (times)
                {
                    long t = e.TimeStamp.ToUniversalTime().Ticks;
                    firstTicks = Math.Min(firstTicks, t);
                    lastTicks = Math.Max(lastTicks, t);
                }
                if (byEvent)
                {
                    string key = $"{provider}#{id}";
                    perEvent[key] = perEvent.TryGetValue(key, out long n) ? n + 1 : 1;
                }
                if (activities && (e.ActivityID != Guid.Empty || e.RelatedActivityID != Guid.Empty))
                {
                    actList.Add(new[] { $"{provider}#{id}",
                        e.ActivityID == Guid.Empty ? "" : e.ActivityID.ToString(),
                        e.RelatedActivityID == Guid.Empty ? "" : e.RelatedActivityID.ToString() });
                }
                if (payloadKeys.Count > 0 && payloadKeys.Contains($"{provider}#{id}"))
                {
                    payloads[$"{provider}#{id}"].Add(Fields(e));
                }
                if (provider == Runtime && id == 1)
                {
                    gcStart++;
                    if (gcEvents && e is GCStartTraceData g)
                    {
                        gcList.Add(new[] { g.Count, g.Depth, (int)g.Reason, (int)g.Type });
                        gcStarts[g.Count] = e.TimeStamp.ToUniversalTime().Ticks;
                    }
                }
                else if (provider == Runtime && id == 2)
                {
                    gcEnd++;
                    if (gcEvents && e is GCEndTraceData ge)
                    {
                        gcSpans.Add(new[] { ge.Count,
                            gcStarts.TryGetValue(ge.Count, out long st) ? st : 0,
                            e.TimeStamp.ToUniversalTime().Ticks });
                    }
                }
                else if (provider == SampleProfiler && id == 0)
                {
                    samples++;
                }
                else if (provider == Logging && IsLogMessage(e.EventName))
                {
                    logs++;
                }
                if (patterns.Count > 0)
                {
                    byte[] payload = e.EventData();
                    for (int k = 0; k < patterns.Count; k++)
                    {
                        if (payload.AsSpan().IndexOf(patterns[k]) >= 0)
                        {
                            found[k]++;
                        }
                    }
                }
            };
            source.Process();
            lost = source.EventsLost;
            pointerSize = source.PointerSize;
            if (dynamicNames)
            {
                using var dyn = new EventPipeEventSource(path);
                dyn.Dynamic.All += e =>
                {
                    string key = $"{e.ProviderName}|{e.EventName}";
                    dynNames[key] = dynNames.TryGetValue(key, out long n) ? n + 1 : 1;
                };
                dyn.Process();
            }
        }
        catch (Exception ex)
        {
            error = $"{ex.GetType().Name}: {ex.Message}";
        }

        using var stdout = Console.OpenStandardOutput();
        using (var w = new Utf8JsonWriter(stdout))
        {
            w.WriteStartObject();
            w.WriteBoolean("ok", error == null);
            if (error != null)
            {
                w.WriteString("error", error);
            }
            w.WriteNumber("events", events);
            w.WriteNumber("lost", lost);
            w.WriteStartObject("providers");
            foreach (var kv in providers)
            {
                w.WriteNumber(kv.Key, kv.Value);
            }
            w.WriteEndObject();
            w.WriteNumber("gcStart", gcStart);
            w.WriteNumber("gcEnd", gcEnd);
            w.WriteNumber("sampleProfiler", samples);
            w.WriteNumber("logMessages", logs);
            w.WriteNumber("pid", pid);
            w.WriteNumber("pointerSize", pointerSize);
            if (times)
            {
                w.WriteNumber("firstTimeUtcTicks", events > 0 ? firstTicks : 0);
                w.WriteNumber("lastTimeUtcTicks", events > 0 ? lastTicks : 0);
            }
            if (byEvent)
            {
                w.WriteStartObject("byEvent");
                foreach (var kv in perEvent)
                {
                    w.WriteNumber(kv.Key, kv.Value);
                }
                w.WriteEndObject();
            }
            if (gcEvents)
            {
                w.WriteStartArray("gcSpans");
                foreach (long[] g in gcSpans)
                {
                    w.WriteStartArray();
                    foreach (long v in g)
                    {
                        w.WriteNumberValue(v);
                    }
                    w.WriteEndArray();
                }
                w.WriteEndArray();
                w.WriteStartArray("gcEvents");
                foreach (int[] g in gcList)
                {
                    w.WriteStartArray();
                    foreach (int v in g)
                    {
                        w.WriteNumberValue(v);
                    }
                    w.WriteEndArray();
                }
                w.WriteEndArray();
            }
            if (payloadKeys.Count > 0)
            {
                WritePayloads(w, payloads);
            }
            if (dynamicNames)
            {
                w.WriteStartObject("dynamicNames");
                foreach (var kv in dynNames)
                {
                    w.WriteNumber(kv.Key, kv.Value);
                }
                w.WriteEndObject();
            }
            if (activities)
            {
                w.WriteStartArray("activities");
                foreach (string[] a in actList)
                {
                    w.WriteStartArray();
                    foreach (string v in a)
                    {
                        w.WriteStringValue(v);
                    }
                    w.WriteEndArray();
                }
                w.WriteEndArray();
            }
            w.WriteStartObject("found");
            for (int k = 0; k < finds.Count; k++)
            {
                w.WriteNumber(finds[k], found[k]);
            }
            w.WriteEndObject();
            w.WriteEndObject();
        }
        stdout.Write("\n"u8);
        return error == null ? 0 : 1;
    }

    // The decoded fields of one event, by TraceEvent's names, with the values it gives for them.
    private static List<KeyValuePair<string, object?>> Fields(TraceEvent e)
    {
        var list = new List<KeyValuePair<string, object?>>();
        string[] names = e.PayloadNames ?? Array.Empty<string>();
        for (int k = 0; k < names.Length; k++)
        {
            object? v;
            try
            {
                v = e.PayloadValue(k);
            }
            catch (Exception)
            {
                continue; // a field TraceEvent cannot decode for this version is left out
            }
            list.Add(new KeyValuePair<string, object?>(names[k], v));
        }
        return list;
    }

    private static void WritePayloads(Utf8JsonWriter w,
                                      SortedDictionary<string, List<List<KeyValuePair<string, object?>>>> payloads)
    {
        w.WriteStartObject("payloads");
        foreach (var kv in payloads)
        {
            w.WriteStartArray(kv.Key);
            foreach (var fields in kv.Value)
            {
                w.WriteStartObject();
                foreach (var f in fields)
                {
                    WriteValue(w, f.Key, f.Value);
                }
                w.WriteEndObject();
            }
            w.WriteEndArray();
        }
        w.WriteEndObject();
    }

    // One field as a JSON member; values of other types (arrays, structs) are left out.
    private static void WriteValue(Utf8JsonWriter w, string name, object? v)
    {
        switch (v)
        {
            case null:
                w.WriteNull(name);
                break;
            case string s:
                w.WriteString(name, s);
                break;
            case bool b:
                w.WriteBoolean(name, b);
                break;
            case Guid g:
                w.WriteString(name, g.ToString("D"));
                break;
            case double d:
                w.WriteNumber(name, d);
                break;
            case float f:
                w.WriteNumber(name, (double)f);
                break;
            case byte[] bytes:
                w.WriteString(name, Convert.ToHexString(bytes).ToLowerInvariant());
                break;
            case Enum en:
                if (Enum.GetUnderlyingType(en.GetType()) == typeof(ulong))
                {
                    w.WriteNumber(name, Convert.ToUInt64(en));
                }
                else
                {
                    w.WriteNumber(name, Convert.ToInt64(en));
                }
                break;
            case ulong ul:
                w.WriteNumber(name, ul);
                break;
            case sbyte or byte or short or ushort or int or uint or long:
                w.WriteNumber(name, Convert.ToInt64(v));
                break;
            default:
                break;
        }
    }

    // By name: the event ids of LoggingEventSource differ between runtime versions.
    private static bool IsLogMessage(string? name) =>
        name == "FormattedMessage" || name == "Message" || name == "MessageJson";

    /* The dotnet-gcdump tool's assembly and its dependencies, apart from tracecheck's own TraceEvent. */
    private sealed class ToolContext : AssemblyLoadContext
    {
        private readonly AssemblyDependencyResolver resolver;

        public ToolContext(string dll) : base("gcdump-tool")
        {
            resolver = new AssemblyDependencyResolver(dll);
        }

        protected override Assembly? Load(AssemblyName name)
        {
            string? path = resolver.ResolveAssemblyToPath(name);
            return path != null ? LoadFromAssemblyPath(path) : null;
        }
    }

    private static object? Get(object o, string prop) =>
        o.GetType().GetProperty(prop, BindingFlags.Public | BindingFlags.Instance)?.GetValue(o);

    private static object? Call(object o, string method, params object?[] args)
    {
        var m = o.GetType().GetMethods(BindingFlags.Public | BindingFlags.Instance)
            .First(x => x.Name == method && x.GetParameters().Length == args.Length);
        var ps = m.GetParameters();
        for (int i = 0; i < args.Length; i++)
        {
            if (ps[i].ParameterType.IsEnum && args[i] is int n)
            {
                args[i] = Enum.ToObject(ps[i].ParameterType, n);
            }
        }
        return m.Invoke(o, args);
    }

    private static int GcDump(string path, string? dll)
    {
        if (!File.Exists(path))
        {
            Console.Error.WriteLine($"tracecheck: {path}: no such file");
            return 2;
        }
        if (dll == null || !File.Exists(dll))
        {
            Console.Error.WriteLine("tracecheck: --gcdump needs the dotnet-gcdump tool's dotnet-gcdump.dll (--gcdump-dll or DOTMON_GCDUMP_DLL)");
            return 2;
        }
        var result = new Dictionary<string, object?>();
        try
        {
            var asm = new ToolContext(dll).LoadFromAssemblyPath(Path.GetFullPath(dll));
            Type dumpType = asm.GetTypes().First(t => t.Name == "GCHeapDump");
            object dump = Activator.CreateInstance(dumpType, path)!;
            object graph = Get(dump, "MemoryGraph")!;
            int nodes = Convert.ToInt32(Get(graph, "NodeIndexLimit"));
            int types = Convert.ToInt32(Get(graph, "NodeTypeIndexLimit"));
            object nodeStorage = Call(graph, "AllocNodeStorage")!;
            object typeStorage = Call(graph, "AllocTypeNodeStorage")!;
            var counts = new long[types];
            var sizes = new long[types];
            for (int i = 0; i < nodes; i++)
            {
                object node = Call(graph, "GetNode", i, nodeStorage)!;
                int t = Convert.ToInt32(Get(node, "TypeIndex"));
                if (t >= 0 && t < types)
                {
                    counts[t]++;
                    sizes[t] += Convert.ToInt64(Get(node, "Size"));
                }
            }
            var byType = new SortedDictionary<string, long[]>(StringComparer.Ordinal);
            for (int t = 0; t < types; t++)
            {
                if (counts[t] == 0)
                {
                    continue;
                }
                object type = Call(graph, "GetType", t, typeStorage)!;
                string name = (string?)Get(type, "Name") ?? "";
                if (byType.TryGetValue(name, out long[]? acc))
                {
                    acc[0] += counts[t];
                    acc[1] += sizes[t];
                }
                else
                {
                    byType[name] = new[] { counts[t], sizes[t] };
                }
            }
            result["ok"] = true;
            result["nodes"] = nodes;
            result["types"] = types;
            result["totalSize"] = Convert.ToInt64(Get(graph, "TotalSize"));
            result["creationTool"] = Get(dump, "CreationTool")?.ToString();
            result["byType"] = byType;
            Console.WriteLine(JsonSerializer.Serialize(result));
            return 0;
        }
        catch (Exception e)
        {
            result["ok"] = false;
            result["error"] = (e.InnerException ?? e).ToString();
            Console.WriteLine(JsonSerializer.Serialize(result));
            return 1;
        }
    }

    private static int Usage()
    {
        Console.Error.WriteLine("usage: tracecheck FILE [--by-event] [--gc-events] [--activities] [--dynamic-names] [--times] [--payloads KEYS] [--find TEXT]...");
        return 2;
    }
}
