// Widths that depend on the data, set through the CSSOM: the Content-Security-Policy
// refuses style attributes in the markup, so the templates put the values in data attributes.

for (const node of document.querySelectorAll("[data-width]")) node.style.width = `${node.dataset.width}%`;
