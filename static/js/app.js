// Small progressive enhancements; every page works without this file.
document.addEventListener("click", (event) => {
  const button = event.target.closest("[data-copy]");
  if (!button) return;
  const source = document.getElementById(button.dataset.copy);
  if (!source) return;
  const text = source.dataset.markdown || source.textContent;
  navigator.clipboard.writeText(text).then(() => {
    const label = button.textContent;
    button.textContent = "Copied";
    setTimeout(() => { button.textContent = label; }, 1500);
  });
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
