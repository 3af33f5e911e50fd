// SPDX-License-Identifier: MIT
//
// Threads parked in known methods, for GET /stacks (the TestApp commands `park` and `unpark`):
// a thread named "dm-waiter" blocked in A.B.Wait (on an event, called from A.B.Run), and a
// thread named "dm-spinner" spinning in C.D.Spin (called from C.D.Run), until `unpark`. Their
// names fit Linux's 15 bytes of a thread name, so /proc/<pid>/task/<tid>/comm shows them whole.
// Namespaces A and C and the classes B and D are the names the tests look for.

using System.IO;
using System.Runtime.CompilerServices;
using System.Threading;

namespace A
{
    internal static class B
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void Run(ManualResetEventSlim stop, TestApp.Parked parked)
        {
            parked.WaiterTid = TestApp.Parked.OsThreadId();
            parked.Started.Signal();
            Wait(stop);
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void Wait(ManualResetEventSlim stop) => stop.Wait();
    }
}

namespace C
{
    internal static class D
    {
        private static long s_spins;

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void Run(ManualResetEventSlim stop, TestApp.Parked parked)
        {
            parked.SpinnerTid = TestApp.Parked.OsThreadId();
            parked.Started.Signal();
            Spin(stop);
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void Spin(ManualResetEventSlim stop)
        {
            while (!stop.IsSet)
            {
                Interlocked.Increment(ref s_spins);
            }
        }
    }
}

namespace TestApp
{
    internal sealed class Parked
    {
        private static Parked? s_current;
        private readonly ManualResetEventSlim _stop = new(false);
        public readonly CountdownEvent Started = new(2);
        public long WaiterTid;
        public long SpinnerTid;

        // The calling thread's id as the kernel has it (/proc/thread-self links to <pid>/task/<tid>).
        public static long OsThreadId() =>
            long.Parse(Path.GetFileName(new DirectoryInfo("/proc/thread-self").LinkTarget ?? "0"));

        // "ok park waiter=<tid> spinner=<tid>" (kernel thread ids) once both run; a second park
        // answers the running ones.
        public static string Park()
        {
            Parked p = s_current ?? new Parked();
            if (s_current == null)
            {
                s_current = p;
                new Thread(() => A.B.Run(p._stop, p)) { IsBackground = true, Name = "dm-waiter" }.Start();
                new Thread(() => C.D.Run(p._stop, p)) { IsBackground = true, Name = "dm-spinner" }.Start();
            }
            p.Started.Wait();
            return $"ok park waiter={p.WaiterTid} spinner={p.SpinnerTid}";
        }

        public static string Unpark()
        {
            s_current?._stop.Set();
            s_current = null;
            return "ok unpark";
        }
    }
}
