// Confirmation of destructive actions: a form with data-confirm="question" asks in a <dialog>
// before it is sent. A static script (the Content-Security-Policy refuses inline handlers);
// the server asks again where a page has no script to run it (bulk actions: a confirm page).

import { el, gettext } from "./socket.js";

function ask(question, confirmLabel) {
  return new Promise((resolve) => {
    const yes = el("button", { type: "button", class: "danger", "data-confirm-yes": "" }, confirmLabel || gettext("Confirm"));
    const no = el("button", { type: "button", "data-confirm-no": "" }, gettext("Keep it"));
    const dialog = el(
      "dialog",
      { class: "confirm", "aria-labelledby": "confirm-question" },
      el("p", { id: "confirm-question" }, question),
      el("div", { class: "actions" }, yes, no),
    );
    const done = (answer) => {
      dialog.close();
      dialog.remove();
      resolve(answer);
    };
    yes.addEventListener("click", () => done(true));
    no.addEventListener("click", () => done(false));
    dialog.addEventListener("cancel", () => done(false)); // Escape
    document.body.append(dialog);
    dialog.showModal();
    no.focus(); // the safe choice has the focus
  });
}

document.addEventListener("submit", async (event) => {
  const form = event.target;
  if (!(form instanceof HTMLFormElement) || !form.dataset.confirm || form.dataset.confirmed) return;
  event.preventDefault();
  const submitter = event.submitter;
  if (await ask(form.dataset.confirm, form.dataset.confirmLabel)) {
    form.dataset.confirmed = "1";
    form.requestSubmit(submitter ?? undefined);
  }
});
