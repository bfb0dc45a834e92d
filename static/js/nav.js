// The header's navigation on narrow screens: folded behind a button that opens it. Without
// this script the navigation simply stays open (the stylesheet folds it only when it ran).

const bar = document.querySelector(".topbar");
const toggle = bar?.querySelector("[data-nav-toggle]");
if (bar && toggle) {
  document.documentElement.classList.add("nav-ready");
  toggle.addEventListener("click", () => {
    const open = bar.classList.toggle("open");
    toggle.setAttribute("aria-expanded", String(open));
  });
}
