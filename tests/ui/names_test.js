// SPDX-License-Identifier: MIT
// The /ui page's frame names (agent/ui/names.js, rules in docs/ui.md "Frame names"), in node
// without a browser: each compiler-generated form, nesting, and names the rules leave alone.
// Usage: node names_test.js PATH/TO/agent/ui/names.js
'use strict';

const { dotmonNames } = require(process.argv[2]);

const cases = [
  // [frame name as dotmon writes it, what the page shows]
  ['TestApp!Program+<>c.<<Main>$>b__0_3(class System.Object)', 'Program.<Main>$ lambda'],
  ['App!Program+<>c__DisplayClass0_0.<<Main>$>b__1()', 'Program.<Main>$ lambda'],
  ['App!Shop.Cart+<>c__DisplayClass4_0`1.<Total>b__0(int32)', 'Shop.Cart.Total lambda'],
  ['App!Shop.Worker+<RunAsync>d__4.MoveNext()', 'Shop.Worker.RunAsync async'],
  ['App!Program.<<Main>$>g__Spin|0_2(int32)', 'Program.<Main>$.Spin'],
  ['App!Shop.Cart.<Add>g__Check|3_0()', 'Shop.Cart.Add.Check'],
  ['App!Program.<Main>$(string[])', 'Program.<Main>$'],
  ['App!X+<>c.<<M>b__0_1>b__2()', 'X.M lambda lambda'],
  ['System.Private.CoreLib!System.Threading.Thread.<PollGC>g__PollGCWorker|1_0()',
    'System.Threading.Thread.PollGC.PollGCWorker'],
  // Left alone: ordinary methods, generic arguments, explicit interface methods, <Module>.
  ['TestApp!TestApp.Hot.SpinHotLoop(int64,float64)', 'TestApp.Hot.SpinHotLoop'],
  ['System.Private.CoreLib!System.Collections.Generic.List`1[System.Int32].Add(!0)',
    'System.Collections.Generic.List`1[System.Int32].Add'],
  ['App!Shop.Bag.System.Collections.IEnumerable.GetEnumerator()', 'Shop.Bag.System.Collections.IEnumerable.GetEnumerator'],
  ['App!<Module>.Init()', '<Module>.Init'],
  ['UNKNOWN', 'UNKNOWN'],
];

let fails = 0;
for (const [raw, want] of cases) {
  const got = dotmonNames.displayName(raw);
  const ok = got === want;
  fails += ok ? 0 : 1;
  console.log((ok ? 'ok   ' : 'FAIL ') + raw + ' -> ' + got + (ok ? '' : ' (expected ' + want + ')'));
}
process.exit(fails > 0 ? 1 : 0);
