// Marlowe sandbox: a streamed run's plan (the server's core.Streamer), as
// Slack's agent surface shows it: the title, then one task per plan item
// and tool step with its state. Plain JavaScript, no build step; app.js
// uses window.MarlowePlan.view and puts the streamed text under it.
"use strict";

(() => {
  // A task's state in words as well as a glyph, so it does not rest on
  // colour alone (Slack's plan shows the same four states).
  const TASK = {
    pending: { glyph: "○", word: "pending" },
    in_progress: { glyph: "◔", word: "in progress" },
    complete: { glyph: "✓", word: "done" },
    error: { glyph: "✕", word: "failed" },
  };

  // view renders stream s ({title, tasks, stopped}) with the page's el and
  // renderText, or returns null when it has no plan to show (an answer
  // streamed on its own).
  function view(s, el, renderText) {
    if (!s.title && !(s.tasks && s.tasks.length)) return null;
    const box = el("div", "plan");
    box.dataset.stopped = String(!!s.stopped);
    if (s.title) {
      const t = el("div", "plan-title");
      t.innerHTML = renderText(s.title);
      box.appendChild(t);
    }
    if (s.tasks && s.tasks.length) {
      const ul = el("ul", "tasks");
      ul.setAttribute("aria-label", "Tasks");
      for (const k of s.tasks) {
        const st = TASK[k.status] || { glyph: "•", word: k.status };
        const li = el("li", "task");
        li.dataset.task = k.id;
        li.dataset.status = k.status;
        const mark = el("span", "mark", st.glyph);
        mark.setAttribute("aria-hidden", "true");
        li.append(mark, el("span", "task-title", k.title), el("span", "task-state", st.word));
        if (k.output) li.appendChild(el("span", "task-output", k.output));
        ul.appendChild(li);
      }
      box.appendChild(ul);
    }
    return box;
  }

  window.MarlowePlan = { view };
})();
