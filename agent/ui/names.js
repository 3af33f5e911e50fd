// SPDX-License-Identifier: MIT
// Frame names for display (the /ui page; tests/ui/names_test.js). dotmon names a frame
// "Module!Namespace.Type.Method(args)" with the C# compiler's generated names left raw; the page
// shows the method part without module and arguments, those names made readable, and keeps the
// raw name for the tooltip. The rules (docs/ui.md "Frame names"):
//   Outer+Nested                      -> Outer.Nested
//   <>c, <>c__DisplayClassN_M          dropped (the closure classes that hold lambdas)
//   <M>b__N_M  (a lambda in M)         -> M lambda
//   <M>g__Name|N_M  (a local function) -> M.Name
//   <M>d__N  (async/iterator state machine), with its MoveNext -> M async
//   <Main>$  (top-level statements)    kept as is
// M is itself made readable (a lambda in a lambda is "M lambda lambda"). A name none of the rules
// match is shown unchanged.
'use strict';

(function (exported) {
  // Splits at '.' and '+' outside <…> and […] (compiler names and generic arguments hold dots).
  function splitTop(s) {
    const parts = [];
    let depth = 0;
    let start = 0;
    for (let i = 0; i < s.length; i++) {
      const c = s[i];
      if (c === '<' || c === '[') {
        depth++;
      } else if ((c === '>' || c === ']') && depth > 0) {
        depth--;
      } else if ((c === '.' || c === '+') && depth === 0 && i > start) {
        parts.push(s.slice(start, i));
        start = i + 1;
      }
    }
    parts.push(s.slice(start));
    return parts;
  }

  // The <…> at the start of seg (balanced), as [inside, rest], or null.
  function angled(seg) {
    if (seg[0] !== '<') {
      return null;
    }
    let depth = 0;
    for (let i = 0; i < seg.length; i++) {
      if (seg[i] === '<') {
        depth++;
      } else if (seg[i] === '>' && --depth === 0) {
        return [seg.slice(1, i), seg.slice(i + 1)];
      }
    }
    return null;
  }

  // One segment (a type or method name) made readable; '' drops it; async marks a state machine.
  function segment(seg) {
    if (seg === '<>c' || /^<>c__DisplayClass\d+(_\d+)?(`\d+)?$/.test(seg)) {
      return { text: '' };
    }
    const a = angled(seg);
    if (!a || a[0] === '') {
      return { text: seg };
    }
    const inner = demangle(a[0]);
    const rest = a[1];
    if (/^b__\d+(_\d+)?$/.test(rest)) {
      return { text: inner + ' lambda' };
    }
    const local = /^g__([^|]+)\|\d+(_\d+)?$/.exec(rest);
    if (local) {
      return { text: inner + '.' + local[1] };
    }
    if (/^d__\d+(`\d+)?$/.test(rest)) {
      return { text: inner + ' async', async: true };
    }
    return { text: seg };
  }

  // A method name ("Namespace.Type+<>c.<M>b__0_1") made readable.
  function demangle(method) {
    const out = [];
    let async = false;
    for (const p of splitTop(method)) {
      if (async && p === 'MoveNext') {
        continue;
      }
      const s = segment(p);
      async = Boolean(s.async);
      if (s.text !== '') {
        out.push(s.text);
      }
    }
    return out.join('.');
  }

  // The method part of "Module!Namespace.Type.Method(args)": no module, no arguments.
  function methodPart(name) {
    const bang = name.indexOf('!');
    let m = bang >= 0 ? name.slice(bang + 1) : name;
    const paren = m.indexOf('(');
    if (paren > 0) {
      m = m.slice(0, paren);
    }
    return m;
  }

  // What the page shows for a frame's full name.
  function displayName(name) {
    return demangle(methodPart(name));
  }

  exported.dotmonNames = { displayName, demangle, methodPart };
})(typeof module !== 'undefined' && module.exports ? module.exports : globalThis);
