// Marlowe sandbox: message text to HTML, as a chat client renders it.
// Plain JavaScript, no build step; app.js uses window.MarloweMarkdown.
//
// Order matters: code (fenced ``` blocks and `spans`) and mention tokens
// (<@id>, <#id>, <!here>, <!subteam^id>) are taken out first and put back
// last, so nothing else runs inside them: `0 9 * * 1-5` keeps its
// asterisks. Everything else is escaped, then *bold* / **bold**, _italic_,
// ~strike~, task boxes ([x], [ ]) and "- " bullets apply; http(s) URLs
// are links. Emphasis needs
// a non-space just inside each marker and a boundary outside it, so the
// asterisks of a cron spec or snake_case names are left alone.
"use strict";

(() => {
  const ESC = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ESC[c]);
  const OPEN = "\u0001", CLOSE = "\u0002"; // around a held-out piece's index
  const URL = /\bhttps?:\/\/[^\s<>"'`\u0001\u0002]*[^\s<>"'`.,;:!?)\u0001\u0002]/g;
  const TOKEN = /<(@[\w.-]+|#[\w.-]+|!here|!channel|!everyone|!subteam\^[\w.-]+)>/g;
  // Before an opening marker: start, space, "(", or a held-out piece.
  const PRE = "(^|[\\s(" + CLOSE + "])";
  // After a closing marker: end, space, punctuation, or a held-out piece.
  const POST = "(?=[\\s).,!?:;" + OPEN + "]|$)";
  const emphasis = (mark, tag) => {
    const m = mark.replace(/[*~]/g, "\\$&");
    return [new RegExp(PRE + m + "(?=\\S)([^" + m + "\\n]*?\\S)" + m + POST, "g"), "$1<" + tag + ">$2</" + tag + ">"];
  };
  const RULES = [
    [/\*\*(?=\S)([^*\n]*?\S)\*\*/g, "<b>$1</b>"],
    emphasis("*", "b"),
    emphasis("_", "i"),
    emphasis("~", "s"),
    [/(^|\n)\s*[-*]?\s*\[(x|X)\]\s/g, '$1<span class="check">✓</span> '],
    [/(^|\n)\s*[-*]?\s*\[ \]\s/g, '$1<span class="todo">○</span> '],
    [/(^|\n)- /g, "$1• "],
  ];

  // render returns the HTML of text. token(body) renders one mention token
  // (body is "@id", "#id", "!here", "!subteam^id") and must escape what it
  // returns; without it a token is shown as typed.
  function render(text, token) {
    const held = [];
    const hold = (html) => OPEN + (held.push(html) - 1) + CLOSE;
    let s = String(text ?? "").replace(/[\u0001\u0002]/g, "");
    s = s.replace(/```\n?([\s\S]*?)\n?```/g, (_, code) => hold("<pre><code>" + esc(code) + "</code></pre>"));
    s = s.replace(/`([^`\n]+)`/g, (_, code) => hold("<code>" + esc(code) + "</code>"));
    s = s.replace(TOKEN, (all, body) => hold(token ? token(body) : esc(all)));
    // Links are clickable, and nothing inside one is emphasis ("_" in a
    // query string); trailing punctuation stays outside.
    s = s.replace(URL, (url) => hold('<a href="' + esc(url) + '" target="_blank" rel="noopener noreferrer">' + esc(url) + "</a>"));
    let h = esc(s);
    for (const [re, to] of RULES) h = h.replace(re, to);
    return h.replace(new RegExp(OPEN + "(\\d+)" + CLOSE, "g"), (_, i) => held[Number(i)]);
  }

  window.MarloweMarkdown = { render, esc };
})();
