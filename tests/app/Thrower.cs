// SPDX-License-Identifier: MIT
//
// Exceptions thrown in known ways, for GET /exceptions (the TestApp command `throw-kinds`), each
// caught so the app goes on:
//   - nested: E.Thrower.Inner throws FormatException("dm inner"), which E.Thrower.Outer
//     catches and wraps as InvalidOperationException("dm outer") (its inner exception);
//   - async: E.Thrower.FailAsync throws TimeoutException("dm async") after an await, in its
//     state machine's MoveNext (type E.Thrower+<FailAsync>d__N), seen again when awaited;
//   - from a filter: E.Thrower.Filter, an exception filter, throws ArgumentException("dm
//     filter") while NotSupportedException("dm filtered") thrown by E.Thrower.Filtered is
//     being dispatched (the runtime swallows the filter's exception; the first goes on).
// The type E.Thrower is the name the tests look for.

using System;
using System.Runtime.CompilerServices;
using System.Threading.Tasks;

namespace E
{
    internal static class Thrower
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        private static void Inner() => throw new FormatException("dm inner");

        [MethodImpl(MethodImplOptions.NoInlining)]
        private static void Outer()
        {
            try
            {
                Inner();
            }
            catch (FormatException e)
            {
                throw new InvalidOperationException("dm outer", e);
            }
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        private static async Task FailAsync()
        {
            await Task.Yield();
            throw new TimeoutException("dm async");
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        private static bool Filter(Exception e) => throw new ArgumentException("dm filter: " + e.Message);

        [MethodImpl(MethodImplOptions.NoInlining)]
        private static void Filtered()
        {
            try
            {
                throw new NotSupportedException("dm filtered");
            }
            catch (Exception e) when (Filter(e))
            {
                // Never: the filter throws, which counts as false.
            }
        }

        public static string Run()
        {
            int caught = 0;
            try
            {
                Outer();
            }
            catch (InvalidOperationException)
            {
                caught++;
            }
            try
            {
                FailAsync().GetAwaiter().GetResult();
            }
            catch (TimeoutException)
            {
                caught++;
            }
            try
            {
                Filtered();
            }
            catch (NotSupportedException)
            {
                caught++;
            }
            return $"ok throw-kinds caught={caught}";
        }
    }
}
