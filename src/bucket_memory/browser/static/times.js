// Keeps the pages' relative times ("3 min ago") true while a page stays open. The server writes each
// label when it renders the page, by the same rule as `ago` here (bucket_memory/browser/times.py);
// this only rewrites the text of <time class="ago"> from its datetime, as text, every 15 s.
"use strict";
(() => {
  const MINUTE = 60, HOUR = 3600, DAY = 86400, DAYS_COUNTED = 30;

  function ago(then, now) {
    const seconds = (now - then) / 1000;
    const size = Math.abs(seconds);
    let amount;
    if (size < MINUTE) return "just now";
    if (size < HOUR) amount = `${Math.floor(size / MINUTE)} min`;
    else if (size < DAY) amount = `${Math.floor(size / HOUR)} h`;
    else if (size < DAYS_COUNTED * DAY) {
      const days = Math.floor(size / DAY);
      amount = days === 1 ? "1 day" : `${days} days`;
    } else return new Date(then).toISOString().slice(0, 10);
    return seconds < 0 ? `in ${amount}` : `${amount} ago`;
  }

  function relabel() {
    const now = Date.now();
    for (const element of document.querySelectorAll("time.ago[datetime]")) {
      const then = Date.parse(element.getAttribute("datetime"));
      if (!Number.isNaN(then)) element.textContent = ago(then, now);
    }
  }

  setInterval(relabel, 15000);
})();
