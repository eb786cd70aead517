// Small progressive enhancements; every page works without this file.
// The page says it runs: what only works with this file (the copy buttons) is hidden
// without it (static/css/app.css: html:not(.js)), rather than a button that does nothing.
document.documentElement.classList.add("js");
function copied(button, label) {
  button.textContent = "Copied";
  setTimeout(() => { button.textContent = label; }, 1500);
}
document.addEventListener("click", (event) => {
  const button = event.target.closest("[data-copy]");
  if (!button) return;
  const source = document.getElementById(button.dataset.copy);
  if (!source) return;
  const text = source.dataset.markdown || source.textContent;
  const label = button.textContent;
  navigator.clipboard.writeText(text).then(() => copied(button, label));
});

// A link marked data-copy-url is a plain download without this file; with it, it copies what
// the URL serves (the transcript's Markdown, fetched on click rather than embedded in the
// page). If the fetch or the clipboard fails, the link downloads as it would without script.
document.querySelectorAll("[data-copy-url]").forEach((link) => {
  if (link.dataset.copyLabel) link.textContent = link.dataset.copyLabel;
});
document.addEventListener("click", (event) => {
  const link = event.target.closest("[data-copy-url]");
  if (!link || !navigator.clipboard || !window.ClipboardItem) return;
  event.preventDefault();
  const label = link.textContent;
  const text = fetch(link.dataset.copyUrl, { credentials: "same-origin" }).then((response) => {
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    return response.blob();
  }).then((blob) => new Blob([blob], { type: "text/plain" }));
  // The item is written while the click still counts as a user gesture (Safari), its text
  // arriving when fetched.
  navigator.clipboard.write([new ClipboardItem({ "text/plain": text })])
    .then(() => copied(link, label))
    .catch(() => { window.location.href = link.href; });
});

// A select marked data-autosubmit submits its form when changed (the workspace switcher).
document.addEventListener("change", (event) => {
  const select = event.target.closest("select[data-autosubmit]");
  if (select && select.form) select.form.submit();
});

// A request htmx sends after the session ended is answered 401 with a note linking the login
// page (agentclash_site.lib.middleware): the note goes above the page, nothing is swapped into
// the fragment's place, and it is not an htmx error for the console. The next request that
// is answered again takes the note away.
function removeSessionNotes() {
  document.querySelectorAll("[data-session-ended]").forEach((note) => note.remove());
}
document.addEventListener("htmx:beforeSwap", (event) => {
  const xhr = event.detail.xhr;
  if (!xhr || xhr.status !== 401) return;
  event.detail.shouldSwap = false;
  event.detail.isError = false;
  const note = new DOMParser().parseFromString(xhr.responseText || "", "text/html").querySelector("[data-session-ended]");
  if (!note) return;
  removeSessionNotes();
  (document.getElementById("main") || document.body).prepend(note);
});
document.addEventListener("htmx:afterRequest", (event) => {
  const xhr = event.detail.xhr;
  if (xhr && xhr.status >= 200 && xhr.status < 300) removeSessionNotes();
});

// Type-ahead suggestions (templates/_suggest_field.html): the field stays a plain text input,
// validated on submit; htmx fills its list with a few matching names as buttons. Down moves
// from the field into the list (Up/Down within it, past either end back to the field),
// Enter or a click fills the field in, Escape closes the list. A field marked
// data-suggest-several holds names separated by commas: a pick replaces the last one.
// A value taken (picked, Enter, or the focus leaving the field and its list) fires
// "suggest:change" once per new value, which is what loads anything depending on the field:
// not the browser's "change", which also fires when the focus moves into the list, half typed.
function suggestParts(element) {
  const box = element.closest("[data-suggest]");
  if (!box) return null;
  const input = box.querySelector("[data-suggest-input]");
  const list = box.querySelector("[data-suggest-list]");
  return input && list ? { box, input, list } : null;
}
function suggestTake(parts) {
  const input = parts.input;
  if (input.value === input.dataset.suggestTaken) return;
  input.dataset.suggestTaken = input.value;
  input.dispatchEvent(new Event("suggest:change", { bubbles: true }));
}
function suggestPick(parts, value) {
  const input = parts.input;
  if (input.hasAttribute("data-suggest-several")) {
    const names = input.value.split(",").map((name) => name.trim());
    names.pop();
    names.push(value);
    input.value = names.filter(Boolean).join(", ") + ", ";
  } else {
    input.value = value;
  }
  suggestClose(parts);
  input.focus();
  suggestTake(parts);
}
// A closed list stays closed until the text changes: an answer still on its way (typing
// fires one per pause) would open it again under the user's feet.
function suggestClose(parts) {
  parts.list.replaceChildren();
  parts.input.dataset.suggestClosed = parts.input.value;
}
document.addEventListener("htmx:beforeSwap", (event) => {
  const target = event.detail.target;
  const parts = target && target.matches && target.matches("[data-suggest-list]") ? suggestParts(target) : null;
  if (parts && parts.input.dataset.suggestClosed === parts.input.value) event.detail.shouldSwap = false;
});
document.addEventListener("focusin", (event) => {
  const parts = event.target.closest ? suggestParts(event.target) : null;
  if (parts && parts.input.dataset.suggestTaken === undefined) parts.input.dataset.suggestTaken = parts.input.value;
});
document.addEventListener("focusout", (event) => {
  const parts = event.target.closest ? suggestParts(event.target) : null;
  if (parts && !(event.relatedTarget && parts.box.contains(event.relatedTarget))) suggestTake(parts);
});
document.addEventListener("click", (event) => {
  const button = event.target.closest("[data-suggest-value]");
  const parts = button && suggestParts(button);
  if (parts) suggestPick(parts, button.dataset.suggestValue);
});
document.addEventListener("keydown", (event) => {
  const parts = event.target.closest ? suggestParts(event.target) : null;
  if (!parts) return;
  const buttons = Array.from(parts.list.querySelectorAll("[data-suggest-value]"));
  const at = buttons.indexOf(event.target);
  if ((event.key === "ArrowDown" || event.key === "ArrowUp") && buttons.length) {
    event.preventDefault();
    const next = at < 0 ? (event.key === "ArrowDown" ? 0 : buttons.length - 1) : at + (event.key === "ArrowDown" ? 1 : -1);
    (buttons[next] || parts.input).focus();
  } else if (event.key === "Escape" && buttons.length) {
    event.preventDefault();
    suggestClose(parts);
    parts.input.focus();
  } else if (event.key === "Enter" && event.target === parts.input && parts.input.hasAttribute("data-suggest-no-submit")) {
    // In a form that does something (start a run), Enter in the field only takes its value.
    event.preventDefault();
    suggestClose(parts);
    suggestTake(parts);
  }
});

// The new-run form: a pack version's change loads its input sets from the element that wraps
// the version fields (runs/run_new.html), which stays while they are swapped. The select itself
// is replaced when the pack changes, and htmx processes new content a moment after the swap,
// so a change made in that moment (a quick arrow key) was lost when the select carried the request.
document.addEventListener("change", (event) => {
  const select = event.target;
  const wrapper = select.name === "pack_version" ? select.closest("[data-version-sets]") : null;
  if (wrapper) wrapper.dispatchEvent(new Event("version:change"));
});

// Run overview (runs/overview.html: #live, #summary) and comparison (runs/compare.html:
// #compare-result): what changes in a polled fragment is said once, by a live region that stays
// in the page (#run-announcer). The fragment swapped every poll carries no live region
// (re-rendered each time it is announced every time, or never), only the text to say in
// data-announce, copied here when it differs from the last one seen: the no-worker notice
// appearing is said once however many polls show it, "Comparison ready." once when the result
// replaces "Computing…". What the page shows when it loads is read with the page, not
// announced. The poll that sees the run end reloads the page (HX-Refresh, runs/views/runs.py);
// a note in sessionStorage tells the reloaded page to say its fragment's text ("Run completed.").
const announced = new Map();
const ANNOUNCE_AFTER_RELOAD = "agentclash:announce-after-reload";
function announce(text) {
  const region = document.getElementById("run-announcer");
  if (region) region.textContent = text;
}
function announceChanges() {
  document.querySelectorAll("[data-announce][id]").forEach((source) => {
    const text = source.dataset.announce;
    if (announced.get(source.id) === text) return;
    announced.set(source.id, text);
    announce(text); // an empty text empties the region: the same notice coming back is said again
  });
}
document.addEventListener("htmx:beforeOnLoad", (event) => {
  const source = event.target;
  const xhr = event.detail.xhr;
  if (!source.matches || !source.matches("[data-announce][id]") || !xhr) return;
  if (xhr.getResponseHeader("HX-Refresh") !== "true") return;
  try {
    sessionStorage.setItem(ANNOUNCE_AFTER_RELOAD, location.pathname + "#" + source.id);
  } catch (error) { /* no storage: the reloaded page says nothing */ }
});
document.addEventListener("htmx:afterSwap", announceChanges);
document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("[data-announce][id]").forEach((source) => announced.set(source.id, source.dataset.announce));
  let note = null;
  try {
    note = sessionStorage.getItem(ANNOUNCE_AFTER_RELOAD);
    sessionStorage.removeItem(ANNOUNCE_AFTER_RELOAD);
  } catch (error) { return; }
  if (!note || !note.startsWith(location.pathname + "#")) return;
  const source = document.getElementById(note.slice(location.pathname.length + 1));
  // A moment after the load, so the region is in the accessibility tree before its text changes.
  if (source && source.dataset.announce) setTimeout(() => announce(source.dataset.announce), 500);
});

// A button disabled while its request runs (hx-disabled-elt: "Test connection") loses the
// keyboard focus to the page's body, and the focus stayed there once the answer came. The
// element that had the focus when the request started gets it back when the request ends,
// unless the focus went elsewhere meanwhile or the element left the page. htmx enables the
// disabled elements after its afterRequest event: the focus is given on the next task.
const focusedAtRequest = new WeakMap(); // by request: a poll running meanwhile has its own
document.addEventListener("htmx:beforeRequest", (event) => {
  const active = document.activeElement;
  if (event.detail.xhr && active && active !== document.body && event.detail.elt.contains(active)) {
    focusedAtRequest.set(event.detail.xhr, active);
  }
});
document.addEventListener("htmx:afterRequest", (event) => {
  const element = event.detail.xhr && focusedAtRequest.get(event.detail.xhr);
  if (!element) return;
  focusedAtRequest.delete(event.detail.xhr);
  setTimeout(() => {
    const lost = !document.activeElement || document.activeElement === document.body;
    if (lost && element.isConnected && !element.disabled) element.focus();
  });
});

// A link to a message or tool call of a transcript written without ?at= (an old bookmark, a
// hand-typed address: the server never sees the #fragment) may name an item the first page
// leaves out; the page then asks for the window holding it, as the case page's links do.
(() => {
  const id = decodeURIComponent(window.location.hash.slice(1));
  if (!/^ev-(message|tool_call)-\d+$/.test(id) || document.getElementById(id)) return;
  if (!document.querySelector("ol.transcript[data-windowed]")) return;
  const url = new URL(window.location.href);
  if (url.searchParams.get("at") === id) return; // asked already: the item does not exist
  url.searchParams.delete("from");
  url.searchParams.set("at", id);
  window.location.replace(url.toString());
})();
