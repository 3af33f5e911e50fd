/* SPDX-License-Identifier: MIT */
#include "ev_native.h"

#include <stdbool.h>
#include <string.h>

#include "common/err.h"
#include "ev_rd.h"

/*
 * The templates of dotnet/runtime's ClrEtwAll.man, written out as field lists. A later version of
 * a template usually appends fields to the earlier one, so most events share one list and take
 * its first n fields (the EVP entries below); the version notes say which template each is.
 */

/* A field of type t, ref r, span s: its name and its JSON key (a name too long for the key is a
 * compile error: the literal would not fit). */
#define FIELD(n, t, r, s)                                                                          \
    {                                                                                              \
        n, t, r, s, sizeof(n) + 3, ",\"" n "\":"                                                   \
    }
#define S(n, t)      FIELD(n, EV_NATIVE_##t, 0, 0)
#define BIN(n, r)    FIELD(n, EV_NATIVE_BINARY, r, 0)
#define ARR(n, r, s) FIELD(n, EV_NATIVE_ARRAY, r, s)
#define CLR          S("ClrInstanceID", U16)
#define ALIGN(a)     FIELD("", EV_NATIVE_ALIGN, a, 0)

/* ---- Microsoft-Windows-DotNETRuntime: GC ------------------------------------------------ */

/* GCStart_V2 (V1: 5 fields; V0 below). */
static const struct ev_native_field gc_start[] = {S("Count", U32),
                                                  S("Depth", U32),
                                                  S("Reason", U32),
                                                  S("Type", U32),
                                                  CLR,
                                                  S("ClientSequenceNumber", U64)};
static const struct ev_native_field gc_start_v0[] = {S("Count", U32), S("Reason", U32)};
static const struct ev_native_field gc_end[] = {S("Count", U32), S("Depth", U32), CLR};
static const struct ev_native_field gc_end_v0[] = {S("Count", U32), S("Depth", U16)};
/* GCNoUserData, GCCreateConcurrentThread, GCTerminateConcurrentThread, DCStartEnd, Startup_V1,
 * TieredCompilationEmpty. */
static const struct ev_native_field clr_only[] = {CLR};
/* GCHeapStats_V2 (V0: 13 fields, V1: 14). */
static const struct ev_native_field gc_heap_stats[] = {S("GenerationSize0", U64),
                                                       S("TotalPromotedSize0", U64),
                                                       S("GenerationSize1", U64),
                                                       S("TotalPromotedSize1", U64),
                                                       S("GenerationSize2", U64),
                                                       S("TotalPromotedSize2", U64),
                                                       S("GenerationSize3", U64),
                                                       S("TotalPromotedSize3", U64),
                                                       S("FinalizationPromotedSize", U64),
                                                       S("FinalizationPromotedCount", U64),
                                                       S("PinnedObjectCount", U32),
                                                       S("SinkBlockCount", U32),
                                                       S("GCHandleCount", U32),
                                                       CLR,
                                                       S("GenerationSize4", U64),
                                                       S("TotalPromotedSize4", U64)};
/* GCCreateSegment_V1 (V0: 3). */
static const struct ev_native_field gc_create_segment[] = {S("Address", U64), S("Size", U64),
                                                           S("Type", U32), CLR};
/* GCFreeSegment_V1 (V0: 1). */
static const struct ev_native_field gc_free_segment[] = {S("Address", U64), CLR};
static const struct ev_native_field gc_suspend_ee_v0[] = {S("Reason", U16)};
static const struct ev_native_field gc_suspend_ee[] = {S("Reason", U32), S("Count", U32), CLR};
/* GCAllocationTick_V4 (V0: 2, V1: 3, V2: 7, V3: 8). */
static const struct ev_native_field gc_allocation_tick[] = {
    S("AllocationAmount", U32),   S("AllocationKind", U32), CLR,
    S("AllocationAmount64", U64), S("TypeID", PTR),         S("TypeName", WSTR),
    S("HeapIndex", U32),          S("Address", PTR),        S("ObjectSize", U64)};
/* GCFinalizersEnd_V1 (V0: 1); GenAwareTemplate; ThreadPoolWorkingThreadCount. */
static const struct ev_native_field count_clr[] = {S("Count", U32), CLR};
static const struct ev_native_field bulk_type[] = {S("Count", U32),
                                                   CLR,
                                                   ARR("Values", 0, 9),
                                                   S("TypeID", U64),
                                                   S("ModuleID", U64),
                                                   S("TypeNameID", U32),
                                                   S("Flags", U32),
                                                   S("CorElementType", U8),
                                                   S("Name", WSTR),
                                                   S("TypeParameterCount", U32),
                                                   ARR("TypeParameters", 9, 1),
                                                   S("", U64)};
static const struct ev_native_field gc_bulk_root_edge[] = {S("Index", U32),
                                                           S("Count", U32),
                                                           CLR,
                                                           ARR("Values", 1, 4),
                                                           S("RootedNodeAddress", PTR),
                                                           S("GCRootKind", U8),
                                                           S("GCRootFlag", U32),
                                                           S("GCRootID", PTR)};
static const struct ev_native_field gc_bulk_root_cwt_edge[] = {
    S("Index", U32),         S("Count", U32),   CLR, ARR("Values", 1, 3), S("GCKeyNodeID", PTR),
    S("GCValueNodeID", PTR), S("GCRootID", PTR)};
static const struct ev_native_field gc_bulk_node[] = {
    S("Index", U32),     S("Count", U32),    CLR,
    ARR("Values", 1, 4), S("Address", PTR),  S("Size", U64),
    S("TypeID", U64),    S("EdgeCount", U64)};
static const struct ev_native_field gc_bulk_edge[] = {
    S("Index", U32),     S("Count", U32), CLR,
    ARR("Values", 1, 2), S("Value", PTR), S("ReferencingFieldID", U32)};
static const struct ev_native_field gc_sampled_object_allocation[] = {
    S("Address", PTR), S("TypeID", PTR), S("ObjectCountForTypeSample", U32),
    S("TotalSizeForTypeSample", U64), CLR};
static const struct ev_native_field gc_bulk_surviving_object_ranges[] = {
    S("Index", U32),     S("Count", U32),     CLR,
    ARR("Values", 1, 2), S("RangeBase", PTR), S("RangeLength", U64)};
static const struct ev_native_field gc_bulk_moved_object_ranges[] = {
    S("Index", U32),        S("Count", U32),      CLR, ARR("Values", 1, 3), S("OldRangeBase", PTR),
    S("NewRangeBase", PTR), S("RangeLength", U64)};
static const struct ev_native_field gc_generation_range[] = {
    S("Generation", U8), S("RangeStart", PTR), S("RangeUsedLength", U64),
    S("RangeReservedLength", U64), CLR};
/* SetGCHandle, PrvSetGCHandle. */
static const struct ev_native_field set_gc_handle[] = {S("HandleID", PTR),    S("ObjectID", PTR),
                                                       S("Kind", U32),        S("Generation", U32),
                                                       S("AppDomainID", U64), CLR};
/* DestroyGCHandle, PrvDestroyGCHandle. */
static const struct ev_native_field destroy_gc_handle[] = {S("HandleID", PTR), CLR};
static const struct ev_native_field pin_object_at_gc_time[] = {
    S("HandleID", PTR), S("ObjectID", PTR), S("ObjectSize", U64), S("TypeName", WSTR), CLR};
/* GCTriggered, BGCAllocWaitBegin/End. */
static const struct ev_native_field reason_clr[] = {S("Reason", U32), CLR};
static const struct ev_native_field gc_bulk_root_ccw[] = {
    S("Count", U32),          CLR,
    ARR("Values", 0, 7),      S("GCRootID", U64),
    S("ObjectID", U64),       S("TypeID", U64),
    S("IUnknown", U64),       S("RefCount", U32),
    S("PeggedRefCount", U32), S("Flags", U32)};
static const struct ev_native_field gc_bulk_rcw[] = {S("Count", U32),     CLR,
                                                     ARR("Values", 0, 6), S("ObjectID", U64),
                                                     S("TypeID", U64),    S("IUnknown", U64),
                                                     S("VTable", U64),    S("RefCount", U32),
                                                     S("Flags", U32)};
static const struct ev_native_field gc_bulk_root_static_var[] = {
    S("Count", U32),     S("AppDomainID", U64), CLR,
    ARR("Values", 0, 5), S("GCRootID", U64),    S("ObjectID", U64),
    S("TypeID", U64),    S("Flags", U32),       S("FieldName", WSTR)};
static const struct ev_native_field gc_dynamic_event[] = {S("Name", WSTR), S("DataSize", U32),
                                                          BIN("Data", 1), CLR};
static const struct ev_native_field increase_memory_pressure[] = {S("BytesAllocated", U64), CLR};
static const struct ev_native_field decrease_memory_pressure[] = {S("BytesFreed", U64), CLR};
/* GCMarkWithType (GCMark, PrvGCMark_V1: 2; PrvGCMark: 1). */
static const struct ev_native_field gc_mark_with_type[] = {S("HeapNum", U32), CLR, S("Type", U32),
                                                           S("Bytes", U64)};
/* GCJoin_V2 (private GCJoin: 3, GCJoin_V1: 4). */
static const struct ev_native_field gc_join[] = {S("Heap", U32), S("JoinTime", U32),
                                                 S("JoinType", U32), CLR, S("JoinID", U32)};
static const struct ev_native_field gc_per_heap_history[] = {CLR,
                                                             S("FreeListAllocated", PTR),
                                                             S("FreeListRejected", PTR),
                                                             S("EndOfSegAllocated", PTR),
                                                             S("CondemnedAllocated", PTR),
                                                             S("PinnedAllocated", PTR),
                                                             S("PinnedAllocatedAdvance", PTR),
                                                             S("RunningFreeListEfficiency", U32),
                                                             S("CondemnReasons0", U32),
                                                             S("CondemnReasons1", U32),
                                                             S("CompactMechanisms", U32),
                                                             S("ExpandMechanisms", U32),
                                                             S("HeapIndex", U32),
                                                             S("ExtraGen0Commit", PTR),
                                                             S("Count", U32),
                                                             ARR("Values", 14, 10),
                                                             S("SizeBefore", PTR),
                                                             S("FreeListBefore", PTR),
                                                             S("FreeObjBefore", PTR),
                                                             S("SizeAfter", PTR),
                                                             S("FreeListAfter", PTR),
                                                             S("FreeObjAfter", PTR),
                                                             S("In", PTR),
                                                             S("PinnedSurv", PTR),
                                                             S("NonePinnedSurv", PTR),
                                                             S("NewAllocation", PTR)};
/* GCGlobalHeap_V4 (private GCGlobalHeap: 6, _V1: 7; runtime _V2: 9, _V3: 11). */
static const struct ev_native_field gc_global_heap[] = {S("FinalYoungestDesired", U64),
                                                        S("NumHeaps", I32),
                                                        S("CondemnedGeneration", U32),
                                                        S("Gen0ReductionCount", U32),
                                                        S("Reason", U32),
                                                        S("GlobalMechanisms", U32),
                                                        CLR,
                                                        S("PauseMode", U32),
                                                        S("MemoryPressure", U32),
                                                        S("CondemnReasons0", U32),
                                                        S("CondemnReasons1", U32),
                                                        S("Count", U32),
                                                        ARR("Values", 11, 1),
                                                        S("Time", U32)};
/* The runtime copies its etw_loh_compact_info and etw_bucket_info arrays as they are in memory:
 * the padding before the pointers is in the payload (the manifest does not show it). */
static const struct ev_native_field gc_loh_compact[] = {CLR,
                                                        S("Count", U16),
                                                        ARR("Values", 1, 6),
                                                        S("TimePlan", U32),
                                                        S("TimeCompact", U32),
                                                        S("TimeRelocate", U32),
                                                        ALIGN(0),
                                                        S("TotalRefs", PTR),
                                                        S("ZeroRefs", PTR)};
static const struct ev_native_field gc_fit_bucket_info[] = {CLR,
                                                            S("BucketKind", U16),
                                                            S("TotalSize", U64),
                                                            S("Count", U16),
                                                            ARR("Values", 3, 4),
                                                            S("Index", U16),
                                                            ALIGN(4),
                                                            S("Count", U32),
                                                            S("Size", PTR)};

/* ---- threads and the thread pool ------------------------------------------------------------ */

static const struct ev_native_field worker_thread[] = {S("WorkerThreadCount", U32),
                                                       S("RetiredWorkerThreads", U32)};
/* IOThread_V1 (V0: 2). */
static const struct ev_native_field io_thread[] = {S("IOThreadCount", U32),
                                                   S("RetiredIOThreads", U32), CLR};
static const struct ev_native_field thread_pool_suspend[] = {S("ClrThreadID", U32),
                                                             S("CpuUtilization", U32)};
static const struct ev_native_field thread_pool_worker_thread[] = {
    S("ActiveWorkerThreadCount", U32), S("RetiredWorkerThreadCount", U32), CLR};
static const struct ev_native_field tp_adjustment_sample[] = {S("Throughput", F64), CLR};
static const struct ev_native_field tp_adjustment_adjustment[] = {
    S("AverageThroughput", F64), S("NewWorkerThreadCount", U32), S("Reason", U32), CLR};
static const struct ev_native_field tp_adjustment_stats[] = {
    S("Duration", F64),
    S("Throughput", F64),
    S("ThreadWave", F64),
    S("ThroughputWave", F64),
    S("ThroughputErrorEstimate", F64),
    S("AverageThroughputErrorEstimate", F64),
    S("ThroughputRatio", F64),
    S("Confidence", F64),
    S("NewControlSetting", F64),
    S("NewThreadWaveMagnitude", U16),
    CLR};
static const struct ev_native_field yield_processor_measurement[] = {
    CLR, S("NsPerYield", F64), S("EstablishedNsPerYield", F64)};
static const struct ev_native_field thread_pool_min_max_threads[] = {
    S("MinWorkerThreads", U16), S("MaxWorkerThreads", U16), S("MinIOCompletionThreads", U16),
    S("MaxIOCompletionThreads", U16), CLR};
static const struct ev_native_field thread_pool_work[] = {S("WorkID", PTR), CLR};
static const struct ev_native_field thread_pool_io_enqueue[] = {
    S("NativeOverlapped", PTR), S("Overlapped", PTR), S("MultiDequeues", BOOL), CLR};
static const struct ev_native_field thread_pool_io_work[] = {S("NativeOverlapped", PTR),
                                                             S("Overlapped", PTR), CLR};
static const struct ev_native_field thread_start_work[] = {S("ID", PTR), CLR};
static const struct ev_native_field method_details[] = {S("MethodID", U64),
                                                        S("TypeID", U64),
                                                        S("MethodToken", U32),
                                                        S("TypeParameterCount", U32),
                                                        S("LoaderModuleID", U64),
                                                        ARR("TypeParameters", 3, 1),
                                                        S("", U64)};
/* TypeLoadStop (TypeLoadStart: 2). */
static const struct ev_native_field type_load_stop[] = {
    S("TypeLoadStartID", U32), CLR, S("LoadLevel", U16), S("TypeID", U64), S("TypeName", WSTR)};
/* ThreadCreated, ThreadCreatedRundown. */
static const struct ev_native_field thread_created[] = {
    S("ManagedThreadID", U64),    S("AppDomainID", U64), S("Flags", U32),
    S("ManagedThreadIndex", U32), S("OSThreadID", U32),  CLR};
static const struct ev_native_field thread_terminated[] = {S("ManagedThreadID", U64),
                                                           S("AppDomainID", U64), CLR};

/* ---- exceptions, contention, stacks, interop ------------------------------------------------ */

static const struct ev_native_field exception_thrown[] = {
    S("ExceptionType", WSTR),   S("ExceptionMessage", WSTR), S("ExceptionEIP", PTR),
    S("ExceptionHRESULT", U32), S("ExceptionFlags", U16),    CLR};
static const struct ev_native_field exception_handling[] = {S("EntryEIP", U64), S("MethodID", U64),
                                                            S("MethodName", WSTR), CLR};
/* ContentionStart_V2 (Contention: 2). */
static const struct ev_native_field contention_start[] = {
    S("ContentionFlags", U8), CLR, S("LockID", PTR), S("AssociatedObjectID", PTR),
    S("LockOwnerThreadID", U64)};
/* ContentionStop_V1 (ContentionStop: 2). */
static const struct ev_native_field contention_stop[] = {S("ContentionFlags", U8), CLR,
                                                         S("DurationNs", F64)};
static const struct ev_native_field lock_created[] = {S("LockID", PTR),
                                                      S("AssociatedObjectID", PTR), CLR};
/* ClrStackWalk: the manifest says count="2", the runtime writes FrameCount addresses. */
static const struct ev_native_field clr_stack_walk[] = {
    CLR,       S("Reserved1", U8), S("Reserved2", U8), S("FrameCount", U32), ARR("Stack", 3, 1),
    S("", PTR)};
static const struct ev_native_field appdomain_mem_allocated[] = {S("AppDomainID", U64),
                                                                 S("Allocated", U64), CLR};
static const struct ev_native_field appdomain_mem_survived[] = {
    S("AppDomainID", U64), S("Survived", U64), S("ProcessSurvived", U64), CLR};
static const struct ev_native_field il_stub_generated[] = {CLR,
                                                           S("ModuleID", U64),
                                                           S("StubMethodID", U64),
                                                           S("StubFlags", U32),
                                                           S("ManagedInteropMethodToken", U32),
                                                           S("ManagedInteropMethodNamespace", WSTR),
                                                           S("ManagedInteropMethodName", WSTR),
                                                           S("ManagedInteropMethodSignature", WSTR),
                                                           S("NativeMethodSignature", WSTR),
                                                           S("StubMethodSignature", WSTR),
                                                           S("StubMethodILCode", WSTR)};
static const struct ev_native_field il_stub_cache_hit[] = {
    CLR,
    S("ModuleID", U64),
    S("StubMethodID", U64),
    S("ManagedInteropMethodToken", U32),
    S("ManagedInteropMethodNamespace", WSTR),
    S("ManagedInteropMethodName", WSTR),
    S("ManagedInteropMethodSignature", WSTR)};

/* ---- methods, the JIT, the loader ---------------------------------------------------------- */

/* MethodLoadUnload_V2 and MethodLoadUnloadRundown_V2 (V0: 6, V1: 7). */
static const struct ev_native_field method_load[] = {S("MethodID", U64),
                                                     S("ModuleID", U64),
                                                     S("MethodStartAddress", U64),
                                                     S("MethodSize", U32),
                                                     S("MethodToken", U32),
                                                     S("MethodFlags", U32),
                                                     CLR,
                                                     S("ReJITID", U64)};
/* MethodLoadUnloadVerbose_V2 and MethodLoadUnloadRundownVerbose_V2 (V0: 9, V1: 10). */
static const struct ev_native_field method_load_verbose[] = {S("MethodID", U64),
                                                             S("ModuleID", U64),
                                                             S("MethodStartAddress", U64),
                                                             S("MethodSize", U32),
                                                             S("MethodToken", U32),
                                                             S("MethodFlags", U32),
                                                             S("MethodNamespace", WSTR),
                                                             S("MethodName", WSTR),
                                                             S("MethodSignature", WSTR),
                                                             CLR,
                                                             S("ReJITID", U64)};
/* MethodJittingStarted_V1 (V0: 7). */
static const struct ev_native_field method_jitting_started[] = {
    S("MethodID", U64),         S("ModuleID", U64),
    S("MethodToken", U32),      S("MethodILSize", U32),
    S("MethodNamespace", WSTR), S("MethodName", WSTR),
    S("MethodSignature", WSTR), CLR};
static const struct ev_native_field method_jit_memory_allocated[] = {
    S("MethodID", U64),
    S("ModuleID", U64),
    S("JitHotCodeRequestSize", U64),
    S("JitRODataRequestSize", U64),
    S("AllocatedSizeForJitCode", U64),
    S("JitAllocFlag", U32),
    CLR};
static const struct ev_native_field r2r_get_entry_point[] = {
    S("MethodID", U64),         S("MethodNamespace", WSTR), S("MethodName", WSTR),
    S("MethodSignature", WSTR), S("EntryPoint", U64),       CLR};
static const struct ev_native_field r2r_get_entry_point_start[] = {S("MethodID", U64), CLR};
/* The nine names of the JIT's inlining and tail-call events, then their own fields. */
#define JIT_NAMES(a, b)                                                                            \
    S("MethodBeingCompiledNamespace", WSTR), S("MethodBeingCompiledName", WSTR),                   \
        S("MethodBeingCompiledNameSignature", WSTR), S(a "Namespace", WSTR), S(a "Name", WSTR),    \
        S(a "NameSignature", WSTR), S(b "Namespace", WSTR), S(b "Name", WSTR),                     \
        S(b "NameSignature", WSTR)
static const struct ev_native_field jit_inlining_succeeded[] = {JIT_NAMES("Inliner", "Inlinee"),
                                                                CLR};
static const struct ev_native_field jit_inlining_failed[] = {
    JIT_NAMES("Inliner", "Inlinee"), S("FailAlways", BOOL), S("FailReason", WSTR), CLR};
static const struct ev_native_field jit_tail_call_succeeded[] = {
    JIT_NAMES("Caller", "Callee"), S("TailPrefix", BOOL), S("TailCallType", U32), CLR};
static const struct ev_native_field jit_tail_call_failed[] = {
    JIT_NAMES("Caller", "Callee"), S("TailPrefix", BOOL), S("FailReason", WSTR), CLR};
/* MethodILToNativeMap_V1 and MethodILToNativeMapRundown_V1 (V0: 9). */
static const struct ev_native_field method_il_to_native_map[] = {S("MethodID", U64),
                                                                 S("ReJITID", U64),
                                                                 S("MethodExtent", U8),
                                                                 S("CountOfMapEntries", U16),
                                                                 ARR("ILOffsets", 3, 1),
                                                                 S("", U32),
                                                                 ARR("NativeOffsets", 3, 1),
                                                                 S("", U32),
                                                                 CLR,
                                                                 S("ILVersionID", U64)};
/* DomainModuleLoadUnload_V1 and ...Rundown_V1 (V0: 7). */
static const struct ev_native_field domain_module_load[] = {
    S("ModuleID", U64),          S("AssemblyID", U64),
    S("AppDomainID", U64),       S("ModuleFlags", U32),
    S("Reserved1", U32),         S("ModuleILPath", WSTR),
    S("ModuleNativePath", WSTR), CLR};
/* ModuleLoadUnload_V2 and ...Rundown_V2 (V0: 6, V1: 7). */
static const struct ev_native_field module_load[] = {S("ModuleID", U64),
                                                     S("AssemblyID", U64),
                                                     S("ModuleFlags", U32),
                                                     S("Reserved1", U32),
                                                     S("ModuleILPath", WSTR),
                                                     S("ModuleNativePath", WSTR),
                                                     CLR,
                                                     S("ManagedPdbSignature", GUID),
                                                     S("ManagedPdbAge", U32),
                                                     S("ManagedPdbBuildPath", WSTR),
                                                     S("NativePdbSignature", GUID),
                                                     S("NativePdbAge", U32),
                                                     S("NativePdbBuildPath", WSTR)};
static const struct ev_native_field assembly_load_v0[] = {
    S("AssemblyID", U64), S("AppDomainID", U64), S("AssemblyFlags", U32),
    S("FullyQualifiedAssemblyName", WSTR)};
static const struct ev_native_field assembly_load[] = {S("AssemblyID", U64),
                                                       S("AppDomainID", U64),
                                                       S("BindingID", U64),
                                                       S("AssemblyFlags", U32),
                                                       S("FullyQualifiedAssemblyName", WSTR),
                                                       CLR};
/* AppDomainLoadUnload_V1 and ...Rundown_V1 (V0: 3). */
static const struct ev_native_field appdomain_load[] = {
    S("AppDomainID", U64), S("AppDomainFlags", U32), S("AppDomainName", WSTR),
    S("AppDomainIndex", U32), CLR};
static const struct ev_native_field module_range[] = {CLR, S("ModuleID", U64), S("RangeBegin", U32),
                                                      S("RangeSize", U32), S("RangeType", U8)};
static const struct ev_native_field runtime_information[] = {CLR,
                                                             S("Sku", U16),
                                                             S("BclMajorVersion", U16),
                                                             S("BclMinorVersion", U16),
                                                             S("BclBuildNumber", U16),
                                                             S("BclQfeNumber", U16),
                                                             S("VMMajorVersion", U16),
                                                             S("VMMinorVersion", U16),
                                                             S("VMBuildNumber", U16),
                                                             S("VMQfeNumber", U16),
                                                             S("StartupFlags", U32),
                                                             S("StartupMode", U8),
                                                             S("CommandLine", WSTR),
                                                             S("ComObjectGuid", GUID),
                                                             S("RuntimeDllPath", WSTR)};
static const struct ev_native_field code_symbols[] = {S("ModuleId", U64),    S("TotalChunks", U16),
                                                      S("ChunkNumber", U16), S("ChunkLength", U32),
                                                      BIN("Chunk", 3),       CLR};
static const struct ev_native_field event_source[] = {
    S("EventID", I32), S("EventName", WSTR), S("EventSourceName", WSTR), S("Payload", WSTR)};
static const struct ev_native_field tiered_settings[] = {CLR, S("Flags", U32)};
static const struct ev_native_field tiered_resume[] = {CLR, S("NewMethodCount", U32)};
/* TieredCompilationBackgroundJitStop (Start: 2). */
static const struct ev_native_field tiered_background_jit[] = {CLR, S("PendingMethodCount", U32),
                                                               S("JittedMethodCount", U32)};
/* AssemblyLoadStop (AssemblyLoadStart: 6). */
static const struct ev_native_field assembly_load_stop[] = {
    CLR,
    S("AssemblyName", WSTR),
    S("AssemblyPath", WSTR),
    S("RequestingAssembly", WSTR),
    S("AssemblyLoadContext", WSTR),
    S("RequestingAssemblyLoadContext", WSTR),
    S("Success", BOOL),
    S("ResultAssemblyName", WSTR),
    S("ResultAssemblyPath", WSTR),
    S("Cached", BOOL)};
static const struct ev_native_field resolution_attempted[] = {CLR,
                                                              S("AssemblyName", WSTR),
                                                              S("Stage", U16),
                                                              S("AssemblyLoadContext", WSTR),
                                                              S("Result", U16),
                                                              S("ResultAssemblyName", WSTR),
                                                              S("ResultAssemblyPath", WSTR),
                                                              S("ErrorMessage", WSTR)};
static const struct ev_native_field alc_resolving_handler_invoked[] = {
    CLR,
    S("AssemblyName", WSTR),
    S("HandlerName", WSTR),
    S("AssemblyLoadContext", WSTR),
    S("ResultAssemblyName", WSTR),
    S("ResultAssemblyPath", WSTR)};
static const struct ev_native_field appdomain_resolve_handler_invoked[] = {
    CLR, S("AssemblyName", WSTR), S("HandlerName", WSTR), S("ResultAssemblyName", WSTR),
    S("ResultAssemblyPath", WSTR)};
static const struct ev_native_field load_from_resolve_handler_invoked[] = {
    CLR, S("AssemblyName", WSTR), S("IsTrackedLoad", BOOL), S("RequestingAssemblyPath", WSTR),
    S("ComputedRequestedAssemblyPath", WSTR)};
static const struct ev_native_field known_path_probed[] = {CLR, S("FilePath", WSTR),
                                                           S("Source", U16), S("Result", I32)};
static const struct ev_native_field jit_instrumentation_data[] = {
    CLR, S("MethodFlags", U32), S("DataSize", U32), S("MethodID", U64), BIN("Data", 2)};
static const struct ev_native_field jit_instrumentation_data_verbose[] = {
    CLR,
    S("MethodFlags", U32),
    S("DataSize", U32),
    S("MethodID", U64),
    S("ModuleID", U64),
    S("MethodToken", U32),
    S("MethodNamespace", WSTR),
    S("MethodName", WSTR),
    S("MethodSignature", WSTR),
    BIN("Data", 2)};
static const struct ev_native_field profiler_message[] = {CLR, S("Message", WSTR)};
static const struct ev_native_field execution_checkpoint[] = {CLR, S("Name", WSTR),
                                                              S("Timestamp", I64)};

/* ---- Microsoft-Windows-DotNETRuntimeRundown, ...Private -------------------------------------- */

static const struct ev_native_field gc_settings_rundown[] = {S("HardLimit", U64),
                                                             S("LOHThreshold", U64),
                                                             S("PhysicalMemoryConfig", U64),
                                                             S("Gen0MinBudgetConfig", U64),
                                                             S("Gen0MaxBudgetConfig", U64),
                                                             S("HighMemPercentConfig", U32),
                                                             S("BitSettings", U32),
                                                             CLR};
static const struct ev_native_field gc_decision[] = {S("DoCompact", BOOL), CLR};
/* GCSettings_V1 (V0: 3). */
static const struct ev_native_field gc_settings[] = {
    S("SegmentSize", U64), S("LargeObjectSegmentSize", U64), S("ServerGC", BOOL), CLR};
/* GCOptimized_V1 (V0: 3). */
static const struct ev_native_field gc_optimized[] = {
    S("DesiredAllocation", U64), S("NewAllocation", U64), S("GenerationNumber", U32), CLR};
static const struct ev_native_field bgc_drain_mark[] = {S("Objects", U64), CLR};
static const struct ev_native_field bgc_revisit[] = {S("Pages", U64), S("Objects", U64),
                                                     S("IsLarge", U32), CLR};
/* BGCOverflow_V1 (V0: 5). */
static const struct ev_native_field bgc_overflow[] = {
    S("Min", U64), S("Max", U64), S("Objects", U64), S("IsLarge", U32), CLR, S("GenNumber", U32)};
/* GCFullNotify_V1 (V0: 2). */
static const struct ev_native_field gc_full_notify[] = {S("GenNumber", U32), S("IsAlloc", U32),
                                                        CLR};
static const struct ev_native_field bgc_1st_sweep_end[] = {S("GenNumber", U32), CLR};
static const struct ev_native_field jitted_method_rich_debug_info[] = {CLR,
                                                                       S("MethodID", U64),
                                                                       S("ReJITID", U64),
                                                                       S("ILVersionID", U64),
                                                                       S("ChunkIndex", U32),
                                                                       S("DataSize", U32),
                                                                       BIN("Data", 5)};
static const struct ev_native_field fail_fast[] = {S("FailFastUserMessage", WSTR),
                                                   S("FailedEIP", PTR), S("OSExitCode", U32),
                                                   S("ClrExitCode", U32), CLR};
/* PrvFinalizeObject (FinalizeObject: 3). */
static const struct ev_native_field prv_finalize_object[] = {S("TypeID", PTR), S("ObjectID", PTR),
                                                             CLR, S("TypeName", WSTR)};
static const struct ev_native_field pin_plug_at_gc_time[] = {S("PlugStart", PTR), S("PlugEnd", PTR),
                                                             S("GapBeforeSize", PTR), CLR};
static const struct ev_native_field ccw_ref_count_change[] = {
    S("HandleID", PTR),    S("ObjectID", PTR),    S("COMInterfacePointer", PTR),
    S("NewRefCount", U32), S("AppDomainID", U64), S("ClassName", WSTR),
    S("NameSpace", WSTR),  S("Operation", WSTR),  CLR};
static const struct ev_native_field multicore_jit[] = {
    CLR, S("String1", WSTR), S("String2", WSTR), S("Int1", I32), S("Int2", I32), S("Int3", I32)};
static const struct ev_native_field multicore_jit_method_code_returned[] = {CLR, S("ModuleID", U64),
                                                                            S("MethodID", U64)};
/* Microsoft-DotNETCore-SampleProfiler's ThreadSample (ep-sample-profiler.c; TraceEvent's
 * ClrThreadSampleTraceData): 0 Error, 1 External, 2 Managed. */
static const struct ev_native_field thread_sample[] = {S("Type", U32)};
static const struct ev_native_field loader_heap_alloc[] = {
    S("LoaderHeapPtr", PTR), S("MemoryAddress", PTR), S("RequestSize", U32),
    S("Unused1", U32),       S("Unused2", U64),       CLR};

/* ---- the table: sorted by (provider, id, version); ev_native_find searches it ---------------- */

#define NF(t) ((uint8_t)(sizeof(t) / sizeof((t)[0])))
#define EV(p, id, ver, name, t)                                                                    \
    {                                                                                              \
        name, EV_NATIVE_##p, ver, id, NF(t), t                                                     \
    }
#define EVP(p, id, ver, name, t, n)                                                                \
    {                                                                                              \
        name, EV_NATIVE_##p, ver, id, n, t                                                         \
    }
#define EV0(p, id, ver, name)                                                                      \
    {                                                                                              \
        name, EV_NATIVE_##p, ver, id, 0, NULL                                                      \
    }
/* The versions of the event families the runtime and its rundown share. */
#define METHOD_VERSIONS(p, id, name)                                                               \
    EVP(p, id, 0, name, method_load, 6), EVP(p, id, 1, name, method_load, 7),                      \
        EV(p, id, 2, name, method_load)
#define METHOD_VERBOSE_VERSIONS(p, id, name)                                                       \
    EVP(p, id, 0, name, method_load_verbose, 9), EVP(p, id, 1, name, method_load_verbose, 10),     \
        EV(p, id, 2, name, method_load_verbose)
#define IL_MAP_VERSIONS(p, id, name)                                                               \
    EVP(p, id, 0, name, method_il_to_native_map, 9), EV(p, id, 1, name, method_il_to_native_map)
#define DOMAIN_MODULE_VERSIONS(p, id, name)                                                        \
    EVP(p, id, 0, name, domain_module_load, 7), EV(p, id, 1, name, domain_module_load)
#define MODULE_VERSIONS(p, id, name)                                                               \
    EVP(p, id, 0, name, module_load, 6), EVP(p, id, 1, name, module_load, 7),                      \
        EV(p, id, 2, name, module_load)
#define ASSEMBLY_VERSIONS(p, id, name)                                                             \
    EV(p, id, 0, name, assembly_load_v0), EV(p, id, 1, name, assembly_load)
#define APPDOMAIN_VERSIONS(p, id, name)                                                            \
    EVP(p, id, 0, name, appdomain_load, 3), EV(p, id, 1, name, appdomain_load)
/* No template in version 0, ClrInstanceID alone in version 1. */
#define CLR_V1_VERSIONS(p, id, name) EV0(p, id, 0, name), EV(p, id, 1, name, clr_only)

static const struct ev_native_event table[] = {
    EVP(RUNTIME, 1, 0, "GCStart", gc_start_v0, 2),
    EVP(RUNTIME, 1, 1, "GCStart", gc_start, 5),
    EV(RUNTIME, 1, 2, "GCStart", gc_start),
    EV(RUNTIME, 2, 0, "GCEnd", gc_end_v0),
    EV(RUNTIME, 2, 1, "GCEnd", gc_end),
    CLR_V1_VERSIONS(RUNTIME, 3, "GCRestartEEEnd"),
    EVP(RUNTIME, 4, 0, "GCHeapStats", gc_heap_stats, 13),
    EVP(RUNTIME, 4, 1, "GCHeapStats", gc_heap_stats, 14),
    EV(RUNTIME, 4, 2, "GCHeapStats", gc_heap_stats),
    EVP(RUNTIME, 5, 0, "GCCreateSegment", gc_create_segment, 3),
    EV(RUNTIME, 5, 1, "GCCreateSegment", gc_create_segment),
    EVP(RUNTIME, 6, 0, "GCFreeSegment", gc_free_segment, 1),
    EV(RUNTIME, 6, 1, "GCFreeSegment", gc_free_segment),
    CLR_V1_VERSIONS(RUNTIME, 7, "GCRestartEEBegin"),
    CLR_V1_VERSIONS(RUNTIME, 8, "GCSuspendEEEnd"),
    EV(RUNTIME, 9, 0, "GCSuspendEEBegin", gc_suspend_ee_v0),
    EV(RUNTIME, 9, 1, "GCSuspendEEBegin", gc_suspend_ee),
    EVP(RUNTIME, 10, 0, "GCAllocationTick", gc_allocation_tick, 2),
    EVP(RUNTIME, 10, 1, "GCAllocationTick", gc_allocation_tick, 3),
    EVP(RUNTIME, 10, 2, "GCAllocationTick", gc_allocation_tick, 7),
    EVP(RUNTIME, 10, 3, "GCAllocationTick", gc_allocation_tick, 8),
    EV(RUNTIME, 10, 4, "GCAllocationTick", gc_allocation_tick),
    CLR_V1_VERSIONS(RUNTIME, 11, "GCCreateConcurrentThread"),
    CLR_V1_VERSIONS(RUNTIME, 12, "GCTerminateConcurrentThread"),
    EVP(RUNTIME, 13, 0, "GCFinalizersEnd", count_clr, 1),
    EV(RUNTIME, 13, 1, "GCFinalizersEnd", count_clr),
    CLR_V1_VERSIONS(RUNTIME, 14, "GCFinalizersBegin"),
    EV(RUNTIME, 15, 0, "BulkType", bulk_type),
    EV(RUNTIME, 16, 0, "GCBulkRootEdge", gc_bulk_root_edge),
    EV(RUNTIME, 17, 0, "GCBulkRootConditionalWeakTableElementEdge", gc_bulk_root_cwt_edge),
    EV(RUNTIME, 18, 0, "GCBulkNode", gc_bulk_node),
    EV(RUNTIME, 19, 0, "GCBulkEdge", gc_bulk_edge),
    EV(RUNTIME, 20, 0, "GCSampledObjectAllocationHigh", gc_sampled_object_allocation),
    EV(RUNTIME, 21, 0, "GCBulkSurvivingObjectRanges", gc_bulk_surviving_object_ranges),
    EV(RUNTIME, 22, 0, "GCBulkMovedObjectRanges", gc_bulk_moved_object_ranges),
    EV(RUNTIME, 23, 0, "GCGenerationRange", gc_generation_range),
    EVP(RUNTIME, 25, 0, "GCMarkStackRoots", gc_mark_with_type, 2),
    EVP(RUNTIME, 26, 0, "GCMarkFinalizeQueueRoots", gc_mark_with_type, 2),
    EVP(RUNTIME, 27, 0, "GCMarkHandles", gc_mark_with_type, 2),
    EVP(RUNTIME, 28, 0, "GCMarkOlderGenerationRoots", gc_mark_with_type, 2),
    EVP(RUNTIME, 29, 0, "FinalizeObject", prv_finalize_object, 3),
    EV(RUNTIME, 30, 0, "SetGCHandle", set_gc_handle),
    EV(RUNTIME, 31, 0, "DestroyGCHandle", destroy_gc_handle),
    EV(RUNTIME, 32, 0, "GCSampledObjectAllocationLow", gc_sampled_object_allocation),
    EV(RUNTIME, 33, 0, "PinObjectAtGCTime", pin_object_at_gc_time),
    EV(RUNTIME, 35, 0, "GCTriggered", reason_clr),
    EV(RUNTIME, 36, 0, "GCBulkRootCCW", gc_bulk_root_ccw),
    EV(RUNTIME, 37, 0, "GCBulkRCW", gc_bulk_rcw),
    EV(RUNTIME, 38, 0, "GCBulkRootStaticVar", gc_bulk_root_static_var),
    EV(RUNTIME, 39, 0, "GCDynamicEvent", gc_dynamic_event),
    EV(RUNTIME, 40, 0, "WorkerThreadCreate", worker_thread),
    EV(RUNTIME, 41, 0, "WorkerThreadTerminate", worker_thread),
    EV(RUNTIME, 42, 0, "WorkerThreadRetire", worker_thread),
    EV(RUNTIME, 43, 0, "WorkerThreadUnretire", worker_thread),
    EVP(RUNTIME, 44, 0, "IOThreadCreate", io_thread, 2),
    EV(RUNTIME, 44, 1, "IOThreadCreate", io_thread),
    EVP(RUNTIME, 45, 0, "IOThreadTerminate", io_thread, 2),
    EV(RUNTIME, 45, 1, "IOThreadTerminate", io_thread),
    EVP(RUNTIME, 46, 0, "IOThreadRetire", io_thread, 2),
    EV(RUNTIME, 46, 1, "IOThreadRetire", io_thread),
    EVP(RUNTIME, 47, 0, "IOThreadUnretire", io_thread, 2),
    EV(RUNTIME, 47, 1, "IOThreadUnretire", io_thread),
    EV(RUNTIME, 48, 0, "ThreadpoolSuspensionSuspendThread", thread_pool_suspend),
    EV(RUNTIME, 49, 0, "ThreadpoolSuspensionResumeThread", thread_pool_suspend),
    EV(RUNTIME, 50, 0, "ThreadPoolWorkerThreadStart", thread_pool_worker_thread),
    EV(RUNTIME, 51, 0, "ThreadPoolWorkerThreadStop", thread_pool_worker_thread),
    EV(RUNTIME, 52, 0, "ThreadPoolWorkerThreadRetirementStart", thread_pool_worker_thread),
    EV(RUNTIME, 53, 0, "ThreadPoolWorkerThreadRetirementStop", thread_pool_worker_thread),
    EV(RUNTIME, 54, 0, "ThreadPoolWorkerThreadAdjustmentSample", tp_adjustment_sample),
    EV(RUNTIME, 55, 0, "ThreadPoolWorkerThreadAdjustmentAdjustment", tp_adjustment_adjustment),
    EV(RUNTIME, 56, 0, "ThreadPoolWorkerThreadAdjustmentStats", tp_adjustment_stats),
    EV(RUNTIME, 57, 0, "ThreadPoolWorkerThreadWait", thread_pool_worker_thread),
    EV(RUNTIME, 58, 0, "YieldProcessorMeasurement", yield_processor_measurement),
    EV(RUNTIME, 59, 0, "ThreadPoolMinMaxThreads", thread_pool_min_max_threads),
    EV(RUNTIME, 60, 0, "ThreadPoolWorkingThreadCount", count_clr),
    EV(RUNTIME, 61, 0, "ThreadPoolEnqueue", thread_pool_work),
    EV(RUNTIME, 62, 0, "ThreadPoolDequeue", thread_pool_work),
    EV(RUNTIME, 63, 0, "ThreadPoolIOEnqueue", thread_pool_io_enqueue),
    EV(RUNTIME, 64, 0, "ThreadPoolIODequeue", thread_pool_io_work),
    EV(RUNTIME, 65, 0, "ThreadPoolIOPack", thread_pool_io_work),
    EV(RUNTIME, 70, 0, "ThreadCreating", thread_start_work),
    EV(RUNTIME, 71, 0, "ThreadRunning", thread_start_work),
    EV(RUNTIME, 72, 0, "MethodDetails", method_details),
    EVP(RUNTIME, 73, 0, "TypeLoadStart", type_load_stop, 2),
    EV(RUNTIME, 74, 0, "TypeLoadStop", type_load_stop),
    EV0(RUNTIME, 80, 0, "ExceptionThrown"),
    EV(RUNTIME, 80, 1, "ExceptionThrown", exception_thrown),
    EV0(RUNTIME, 81, 0, "ContentionStart"),
    EVP(RUNTIME, 81, 1, "ContentionStart", contention_start, 2),
    EV(RUNTIME, 81, 2, "ContentionStart", contention_start),
    EV(RUNTIME, 82, 0, "CLRStackWalk", clr_stack_walk),
    EV(RUNTIME, 83, 0, "AppDomainMemAllocated", appdomain_mem_allocated),
    EV(RUNTIME, 84, 0, "AppDomainMemSurvived", appdomain_mem_survived),
    EV(RUNTIME, 85, 0, "ThreadCreated", thread_created),
    EV(RUNTIME, 86, 0, "ThreadTerminated", thread_terminated),
    EV(RUNTIME, 87, 0, "ThreadDomainEnter", thread_terminated),
    EV(RUNTIME, 88, 0, "ILStubGenerated", il_stub_generated),
    EV(RUNTIME, 89, 0, "ILStubCacheHit", il_stub_cache_hit),
    EV(RUNTIME, 90, 0, "LockCreated", lock_created),
    EVP(RUNTIME, 91, 0, "ContentionStop", contention_stop, 2),
    EV(RUNTIME, 91, 1, "ContentionStop", contention_stop),
    METHOD_VERSIONS(RUNTIME, 141, "MethodLoad"),
    METHOD_VERSIONS(RUNTIME, 142, "MethodUnload"),
    METHOD_VERBOSE_VERSIONS(RUNTIME, 143, "MethodLoadVerbose"),
    METHOD_VERBOSE_VERSIONS(RUNTIME, 144, "MethodUnloadVerbose"),
    EVP(RUNTIME, 145, 0, "MethodJittingStarted", method_jitting_started, 7),
    EV(RUNTIME, 145, 1, "MethodJittingStarted", method_jitting_started),
    EV(RUNTIME, 146, 0, "MethodJitMemoryAllocatedForCode", method_jit_memory_allocated),
    DOMAIN_MODULE_VERSIONS(RUNTIME, 151, "DomainModuleLoad"),
    MODULE_VERSIONS(RUNTIME, 152, "ModuleLoad"),
    MODULE_VERSIONS(RUNTIME, 153, "ModuleUnload"),
    ASSEMBLY_VERSIONS(RUNTIME, 154, "AssemblyLoad"),
    ASSEMBLY_VERSIONS(RUNTIME, 155, "AssemblyUnload"),
    APPDOMAIN_VERSIONS(RUNTIME, 156, "AppDomainLoad"),
    APPDOMAIN_VERSIONS(RUNTIME, 157, "AppDomainUnload"),
    EV(RUNTIME, 158, 0, "ModuleRangeLoad", module_range),
    EV(RUNTIME, 159, 0, "R2RGetEntryPoint", r2r_get_entry_point),
    EV(RUNTIME, 160, 0, "R2RGetEntryPointStart", r2r_get_entry_point_start),
    EV(RUNTIME, 185, 0, "MethodJitInliningSucceeded", jit_inlining_succeeded),
    EV(RUNTIME, 187, 0, "RuntimeInformationStart", runtime_information),
    EV(RUNTIME, 188, 0, "MethodJitTailCallSucceeded", jit_tail_call_succeeded),
    IL_MAP_VERSIONS(RUNTIME, 190, "MethodILToNativeMap"),
    EV(RUNTIME, 191, 0, "MethodJitTailCallFailed", jit_tail_call_failed),
    EV(RUNTIME, 192, 0, "MethodJitInliningFailed", jit_inlining_failed),
    EV(RUNTIME, 200, 0, "IncreaseMemoryPressure", increase_memory_pressure),
    EV(RUNTIME, 201, 0, "DecreaseMemoryPressure", decrease_memory_pressure),
    EV(RUNTIME, 202, 0, "GCMarkWithType", gc_mark_with_type),
    EV(RUNTIME, 203, 2, "GCJoin", gc_join),
    EV(RUNTIME, 204, 3, "GCPerHeapHistory", gc_per_heap_history),
    EVP(RUNTIME, 205, 2, "GCGlobalHeapHistory", gc_global_heap, 9),
    EVP(RUNTIME, 205, 3, "GCGlobalHeapHistory", gc_global_heap, 11),
    EV(RUNTIME, 205, 4, "GCGlobalHeapHistory", gc_global_heap),
    EV(RUNTIME, 206, 0, "GenAwareBegin", count_clr),
    EV(RUNTIME, 207, 0, "GenAwareEnd", count_clr),
    EV(RUNTIME, 208, 0, "GCLOHCompact", gc_loh_compact),
    EV(RUNTIME, 209, 0, "GCFitBucketInfo", gc_fit_bucket_info),
    EV(RUNTIME, 250, 0, "ExceptionCatchStart", exception_handling),
    EV0(RUNTIME, 251, 0, "ExceptionCatchStop"),
    EV(RUNTIME, 252, 0, "ExceptionFinallyStart", exception_handling),
    EV0(RUNTIME, 253, 0, "ExceptionFinallyStop"),
    EV(RUNTIME, 254, 0, "ExceptionFilterStart", exception_handling),
    EV0(RUNTIME, 255, 0, "ExceptionFilterStop"),
    EV0(RUNTIME, 256, 0, "ExceptionThrownStop"),
    EV(RUNTIME, 260, 0, "CodeSymbols", code_symbols),
    EV(RUNTIME, 270, 0, "EventSource", event_source),
    EV(RUNTIME, 280, 0, "TieredCompilationSettings", tiered_settings),
    EV(RUNTIME, 281, 0, "TieredCompilationPause", clr_only),
    EV(RUNTIME, 282, 0, "TieredCompilationResume", tiered_resume),
    EVP(RUNTIME, 283, 0, "TieredCompilationBackgroundJitStart", tiered_background_jit, 2),
    EV(RUNTIME, 284, 0, "TieredCompilationBackgroundJitStop", tiered_background_jit),
    EVP(RUNTIME, 290, 0, "AssemblyLoadStart", assembly_load_stop, 6),
    EV(RUNTIME, 291, 0, "AssemblyLoadStop", assembly_load_stop),
    EV(RUNTIME, 292, 0, "ResolutionAttempted", resolution_attempted),
    EV(RUNTIME, 293, 0, "AssemblyLoadContextResolvingHandlerInvoked",
       alc_resolving_handler_invoked),
    EV(RUNTIME, 294, 0, "AppDomainAssemblyResolveHandlerInvoked",
       appdomain_resolve_handler_invoked),
    EV(RUNTIME, 295, 0, "AssemblyLoadFromResolveHandlerInvoked", load_from_resolve_handler_invoked),
    EV(RUNTIME, 296, 0, "KnownPathProbed", known_path_probed),
    EV(RUNTIME, 297, 0, "JitInstrumentationData", jit_instrumentation_data),
    EV(RUNTIME, 298, 0, "JitInstrumentationDataVerbose", jit_instrumentation_data_verbose),
    EV(RUNTIME, 299, 0, "ProfilerMessage", profiler_message),
    EV(RUNTIME, 300, 0, "ExecutionCheckpoint", execution_checkpoint),

    EV(RUNDOWN, 0, 0, "CLRStackWalkDCStart", clr_stack_walk),
    EV(RUNDOWN, 10, 0, "GCSettingsRundown", gc_settings_rundown),
    METHOD_VERSIONS(RUNDOWN, 141, "MethodDCStart"),
    METHOD_VERSIONS(RUNDOWN, 142, "MethodDCEnd"),
    METHOD_VERBOSE_VERSIONS(RUNDOWN, 143, "MethodDCStartVerbose"),
    METHOD_VERBOSE_VERSIONS(RUNDOWN, 144, "MethodDCEndVerbose"),
    CLR_V1_VERSIONS(RUNDOWN, 145, "DCStartComplete"),
    CLR_V1_VERSIONS(RUNDOWN, 146, "DCEndComplete"),
    CLR_V1_VERSIONS(RUNDOWN, 147, "DCStartInit"),
    CLR_V1_VERSIONS(RUNDOWN, 148, "DCEndInit"),
    IL_MAP_VERSIONS(RUNDOWN, 149, "MethodDCStartILToNativeMap"),
    IL_MAP_VERSIONS(RUNDOWN, 150, "MethodDCEndILToNativeMap"),
    DOMAIN_MODULE_VERSIONS(RUNDOWN, 151, "DomainModuleDCStart"),
    DOMAIN_MODULE_VERSIONS(RUNDOWN, 152, "DomainModuleDCEnd"),
    MODULE_VERSIONS(RUNDOWN, 153, "ModuleDCStart"),
    MODULE_VERSIONS(RUNDOWN, 154, "ModuleDCEnd"),
    ASSEMBLY_VERSIONS(RUNDOWN, 155, "AssemblyDCStart"),
    ASSEMBLY_VERSIONS(RUNDOWN, 156, "AssemblyDCEnd"),
    APPDOMAIN_VERSIONS(RUNDOWN, 157, "AppDomainDCStart"),
    APPDOMAIN_VERSIONS(RUNDOWN, 158, "AppDomainDCEnd"),
    EV(RUNDOWN, 159, 0, "ThreadDC", thread_created),
    EV(RUNDOWN, 160, 0, "ModuleRangeDCStart", module_range),
    EV(RUNDOWN, 161, 0, "ModuleRangeDCEnd", module_range),
    EV(RUNDOWN, 187, 0, "RuntimeInformationDCStart", runtime_information),
    EV(RUNDOWN, 280, 0, "TieredCompilationSettingsDCStart", tiered_settings),
    EV(RUNDOWN, 300, 0, "ExecutionCheckpointDCEnd", execution_checkpoint),

    EV(PRIVATE, 1, 1, "GCDecision", gc_decision),
    EVP(PRIVATE, 2, 0, "GCSettings", gc_settings, 3),
    EV(PRIVATE, 2, 1, "GCSettings", gc_settings),
    EVP(PRIVATE, 3, 0, "GCOptimized", gc_optimized, 3),
    EV(PRIVATE, 3, 1, "GCOptimized", gc_optimized),
    EV(PRIVATE, 4, 1, "GCPerHeapHistory", clr_only),
    EV0(PRIVATE, 4, 2, "GCPerHeapHistory"),
    EVP(PRIVATE, 5, 0, "GCGlobalHeapHistory", gc_global_heap, 6),
    EVP(PRIVATE, 5, 1, "GCGlobalHeapHistory", gc_global_heap, 7),
    EVP(PRIVATE, 6, 0, "GCJoin", gc_join, 3),
    EVP(PRIVATE, 6, 1, "GCJoin", gc_join, 4),
    EVP(PRIVATE, 7, 0, "PrvGCMarkStackRoots", gc_mark_with_type, 1),
    EVP(PRIVATE, 7, 1, "PrvGCMarkStackRoots", gc_mark_with_type, 2),
    EVP(PRIVATE, 8, 0, "PrvGCMarkFinalizeQueueRoots", gc_mark_with_type, 1),
    EVP(PRIVATE, 8, 1, "PrvGCMarkFinalizeQueueRoots", gc_mark_with_type, 2),
    EVP(PRIVATE, 9, 0, "PrvGCMarkHandles", gc_mark_with_type, 1),
    EVP(PRIVATE, 9, 1, "PrvGCMarkHandles", gc_mark_with_type, 2),
    EVP(PRIVATE, 10, 0, "PrvGCMarkCards", gc_mark_with_type, 1),
    EVP(PRIVATE, 10, 1, "PrvGCMarkCards", gc_mark_with_type, 2),
    EV(PRIVATE, 11, 0, "BGCBegin", clr_only),
    EV(PRIVATE, 12, 0, "BGC1stNonConEnd", clr_only),
    EV(PRIVATE, 13, 0, "BGC1stConEnd", clr_only),
    EV(PRIVATE, 14, 0, "BGC2ndNonConBegin", clr_only),
    EV(PRIVATE, 15, 0, "BGC2ndNonConEnd", clr_only),
    EV(PRIVATE, 16, 0, "BGC2ndConBegin", clr_only),
    EV(PRIVATE, 17, 0, "BGC2ndConEnd", clr_only),
    EV(PRIVATE, 18, 0, "BGCPlanEnd", clr_only),
    EV(PRIVATE, 19, 0, "BGCSweepEnd", clr_only),
    EV(PRIVATE, 20, 0, "BGCDrainMark", bgc_drain_mark),
    EV(PRIVATE, 21, 0, "BGCRevisit", bgc_revisit),
    EVP(PRIVATE, 22, 0, "BGCOverflow", bgc_overflow, 5),
    EV(PRIVATE, 22, 1, "BGCOverflow", bgc_overflow),
    EV(PRIVATE, 23, 0, "BGCAllocWaitBegin", reason_clr),
    EV(PRIVATE, 24, 0, "BGCAllocWaitEnd", reason_clr),
    EVP(PRIVATE, 25, 0, "GCFullNotify", gc_full_notify, 2),
    EV(PRIVATE, 25, 1, "GCFullNotify", gc_full_notify),
    EV(PRIVATE, 26, 0, "BGC1stSweepEnd", bgc_1st_sweep_end),
    EV(PRIVATE, 189, 0, "JittedMethodRichDebugInfo", jitted_method_rich_debug_info),
    EV(PRIVATE, 191, 0, "FailFast", fail_fast),
    EV(PRIVATE, 192, 0, "PrvFinalizeObject", prv_finalize_object),
    EV(PRIVATE, 194, 0, "PrvSetGCHandle", set_gc_handle),
    EV(PRIVATE, 195, 0, "PrvDestroyGCHandle", destroy_gc_handle),
    EV(PRIVATE, 199, 0, "PinPlugAtGCTime", pin_plug_at_gc_time),
    EV(PRIVATE, 200, 0, "CCWRefCountChange", ccw_ref_count_change),
    EV(PRIVATE, 201, 0, "MulticoreJit", multicore_jit),
    EV(PRIVATE, 202, 0, "MulticoreJitMethodCodeReturned", multicore_jit_method_code_returned),
    EV(PRIVATE, 310, 0, "AllocRequest", loader_heap_alloc),

    EV(SAMPLER, 0, 0, "ThreadSample", thread_sample),
};

#define TABLE_SIZE (sizeof(table) / sizeof(table[0]))

/* ---- lookups ----------------------------------------------------------------------------- */

enum ev_native_provider ev_native_provider_of(const char *name)
{
    static const char base[] = "Microsoft-Windows-DotNETRuntime";
    if (name != NULL && strcmp(name, "Microsoft-DotNETCore-SampleProfiler") == 0) {
        return EV_NATIVE_SAMPLER;
    }
    if (name == NULL || strncmp(name, base, sizeof(base) - 1) != 0) {
        return EV_NATIVE_NONE;
    }
    const char *rest = name + sizeof(base) - 1;
    return rest[0] == '\0'                ? EV_NATIVE_RUNTIME
           : strcmp(rest, "Rundown") == 0 ? EV_NATIVE_RUNDOWN
           : strcmp(rest, "Private") == 0 ? EV_NATIVE_PRIVATE
                                          : EV_NATIVE_NONE;
}

/* (provider, id, version) as one ordered key. */
static uint64_t key_of(uint32_t p, uint32_t id, uint32_t version)
{
    return ((uint64_t)p << 48) | ((uint64_t)id << 16) | (version & 0xFFFFu);
}

const struct ev_native_event *ev_native_find(enum ev_native_provider p, uint32_t id,
                                             uint32_t version)
{
    if (p == EV_NATIVE_NONE || id > 0xFFFFu || version > 0xFFu) {
        return NULL;
    }
    uint64_t want = key_of((uint32_t)p, id, version);
    size_t lo = 0;
    size_t hi = TABLE_SIZE;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct ev_native_event *e = &table[mid];
        uint64_t k = key_of(e->provider, e->id, e->version);
        if (k == want) {
            return e;
        }
        if (k < want) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return NULL;
}

const struct ev_native_event *ev_native_lookup(const char *provider, uint32_t id, uint32_t version)
{
    return ev_native_find(ev_native_provider_of(provider), id, version);
}

int ev_native_index(const struct ev_native_event *e, const char *name)
{
    for (int k = 0; k < e->nfields; k++) {
        if (strcmp(e->fields[k].name, name) == 0) {
            return k;
        }
    }
    return -1;
}

const struct ev_native_event *ev_native_table(size_t *n)
{
    *n = TABLE_SIZE;
    return table;
}

/* ---- the walker ---------------------------------------------------------------------------- */

struct walk {
    const struct ev_native_event *e;
    const uint8_t *p;
    size_t n;
    size_t at;   /* the next byte to read */
    size_t base; /* where the current array element began (0 outside arrays) */
    uint32_t ptr_size;
    ev_native_cb cb;
    void *ud;
    struct ev_native_value v[EV_NATIVE_MAX_FIELDS]; /* the latest value of each field */
};

/* Size of a fixed-size type, or 0 for the variable ones. */
static uint32_t fixed_size(uint8_t type, uint32_t ptr_size)
{
    static const uint8_t sizes[] = {
        [EV_NATIVE_U8] = 1,   [EV_NATIVE_U16] = 2, [EV_NATIVE_U32] = 4,
        [EV_NATIVE_U64] = 8,  [EV_NATIVE_I32] = 4, [EV_NATIVE_I64] = 8,
        [EV_NATIVE_BOOL] = 4, [EV_NATIVE_F64] = 8, [EV_NATIVE_GUID] = 16};
    if (type == EV_NATIVE_PTR) {
        return ptr_size;
    }
    return type < sizeof(sizes) ? sizes[type] : 0;
}

/* Reads field k (not an array) at w->at into w->v[k]. */
static int read_field(struct walk *w, uint16_t k)
{
    const struct ev_native_field *f = &w->e->fields[k];
    struct ev_native_value *v = &w->v[k];
    const uint8_t *p = w->p + w->at;
    size_t left = w->n - w->at;
    uint32_t size = fixed_size(f->type, w->ptr_size);
    if (size > 0) {
        if (left < size) {
            return AGENT_E_PROTO;
        }
        v->u = size == 1   ? p[0]
               : size == 2 ? ev_load_u16(p)
               : size == 4 ? ev_load_u32(p)
               : size == 8 ? ev_load_u64(p)
                           : 0;
        if (f->type == EV_NATIVE_I32) {
            v->u = (uint64_t)(int64_t)(int32_t)(uint32_t)v->u;
        }
        v->count = 0;
    } else if (f->type == EV_NATIVE_WSTR) {
        size_t k2 = 0;
        while (k2 + 1 < left && (p[k2] != 0 || p[k2 + 1] != 0)) {
            k2 += 2;
        }
        if (k2 + 1 >= left || k2 > UINT32_MAX - 2) {
            return AGENT_E_PROTO; /* no NUL */
        }
        v->count = (uint32_t)(k2 / 2);
        v->u = 0;
        size = (uint32_t)k2 + 2;
        v->p = p;
        v->len = (uint32_t)k2;
        w->at += size;
        return 0;
    } else if (f->type == EV_NATIVE_ALIGN) {
        uint32_t a = f->ref != 0 ? f->ref : w->ptr_size;
        size = (uint32_t)((a - (w->at - w->base) % a) % a);
        if (left < size) {
            return AGENT_E_PROTO;
        }
        v->count = 0;
        v->u = 0;
    } else { /* BINARY */
        uint64_t len = w->v[f->ref].u;
        if (len > left) {
            return AGENT_E_PROTO;
        }
        size = (uint32_t)len;
        v->count = size;
        v->u = 0;
    }
    v->p = p;
    v->len = size;
    w->at += size;
    return 0;
}

static int step(struct walk *w, enum ev_native_step s, uint16_t idx, unsigned depth,
                const struct ev_native_value *v)
{
    return w->cb != NULL ? w->cb(w->ud, s, idx, depth, v) : 0;
}

static int walk_fields(struct walk *w, uint16_t first, uint16_t end, unsigned depth);

/* The array field k: its count from its ref field, then each element's fields. */
static int walk_array(struct walk *w, uint16_t k, unsigned depth)
{
    const struct ev_native_field *f = &w->e->fields[k];
    uint64_t count = w->v[f->ref].u;
    if (count > w->n - w->at || depth >= EV_NATIVE_MAX_DEPTH) {
        return AGENT_E_PROTO; /* every element takes a byte at least */
    }
    struct ev_native_value a = {NULL, 0, (uint32_t)count, count};
    size_t start = w->at;
    size_t outer = w->base;
    int rc = step(w, EV_NATIVE_ARRAY_BEGIN, k, depth, &a);
    for (uint32_t i = 0; rc == 0 && i < count; i++) {
        struct ev_native_value el = {NULL, 0, i, i};
        w->base = w->at;
        rc = step(w, EV_NATIVE_ELEM_BEGIN, k, depth, &el);
        rc = rc == 0 ? walk_fields(w, (uint16_t)(k + 1), (uint16_t)(k + 1 + f->span), depth + 1)
                     : rc;
        rc = rc == 0 ? step(w, EV_NATIVE_ELEM_END, k, depth, &el) : rc;
    }
    w->base = outer;
    if (rc != 0) {
        return rc;
    }
    a.p = w->p + start;
    a.len = (uint32_t)(w->at - start);
    w->v[k] = a;
    return step(w, EV_NATIVE_ARRAY_END, k, depth, &a);
}

static int walk_fields(struct walk *w, uint16_t first, uint16_t end, unsigned depth)
{
    int rc = 0;
    for (uint16_t k = first; rc == 0 && k < end; k++) {
        if (w->e->fields[k].type == EV_NATIVE_ARRAY) {
            rc = walk_array(w, k, depth);
            k = (uint16_t)(k + w->e->fields[k].span);
            continue;
        }
        rc = read_field(w, k);
        if (rc == 0 && w->e->fields[k].type != EV_NATIVE_ALIGN) {
            rc = step(w, EV_NATIVE_FIELD, k, depth, &w->v[k]);
        }
    }
    return rc;
}

static void walk_init(struct walk *w, const struct ev_native_event *e, const uint8_t *p, size_t n,
                      uint32_t ptr_size, ev_native_cb cb, void *ud)
{
    static const uint8_t none[1];
    w->e = e;
    w->p = p != NULL ? p : none; /* no arithmetic on a null pointer */
    w->n = p != NULL ? n : 0;
    w->at = 0;
    w->base = 0;
    w->ptr_size = ptr_size == 4 ? 4 : 8;
    w->cb = cb;
    w->ud = ud;
    /* w->v needs no clearing: a field's ref is an earlier field, read before it is used. */
}

int ev_native_walk(const struct ev_native_event *e, const uint8_t *p, size_t n, uint32_t ptr_size,
                   ev_native_cb cb, void *ud)
{
    struct walk w;
    walk_init(&w, e, p, n, ptr_size, cb, ud);
    return walk_fields(&w, 0, e->nfields, 0);
}

/* ev_native_decode's callback: keeps the top-level values. */
static int keep_top(void *ud, enum ev_native_step s, uint16_t idx, unsigned depth,
                    const struct ev_native_value *v)
{
    struct ev_native_record *rec = ud;
    if (depth == 0 && (s == EV_NATIVE_FIELD || s == EV_NATIVE_ARRAY_END)) {
        rec->v[idx] = *v;
    }
    return 0;
}

int ev_native_decode(struct ev_native_record *rec, const struct ev_native_event *e,
                     const uint8_t *p, size_t n, uint32_t ptr_size)
{
    struct walk w;
    rec->event = e;
    memset(rec->v, 0, sizeof(rec->v));
    walk_init(&w, e, p, n, ptr_size, keep_top, rec);
    int rc = walk_fields(&w, 0, e->nfields, 0);
    rec->size = w.at;
    return rc;
}
