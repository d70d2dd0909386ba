// Mark numeric table cells so guide.css can right-align them (tables written by
// pandas carry no column types). A cell is numeric if it reads as a number,
// optionally with a unit or a multiplier sign: "1,234.5", "−3", "12 %", "1.3×".
(function () {
  "use strict";
  var NUMBER = /^[\s]*[-+\u2212]?(\d{1,3}(,\d{3})+|\d+)?(\.\d+)?([eE][-+]?\d+)?\s*(%|\u00d7|x|\u00b5s|us|ms|s|B|KiB|MiB|GiB|TB\/s|GB\/s|TFLOP\/s)?\s*$/;
  function mark() {
    var cells = document.querySelectorAll(
      "table.pg-table td, .rendered_html table.dataframe td, .cell_output table.dataframe td"
    );
    for (var i = 0; i < cells.length; i++) {
      var text = cells[i].textContent.trim();
      if (text && text !== "-" && /\d/.test(text) && NUMBER.test(text)) {
        cells[i].classList.add("pg-num");
      } else if (text === "\u2013" || text === "nan") {
        cells[i].classList.add("pg-num"); // missing values line up with the numbers
      }
    }
  }
  // The largest image a srcset offers ("a.png, a_2_00x.png 2.00x"): sphinx-gallery's
  // image_srcset writes a 2x version of every figure.
  function largest(img) {
    var best = img.getAttribute("src"), most = 1;
    (img.getAttribute("srcset") || "").split(",").forEach(function (entry) {
      var parts = entry.trim().split(/\s+/), x = parseFloat(parts[1]);
      if (parts[0] && x > most) { best = parts[0]; most = x; }
    });
    return best;
  }
  // Figures are drawn for a wide screen: a click opens the full-size (2x) image.
  function zoomable() {
    var figures = document.querySelectorAll(".bd-article img.sphx-glr-single-img, .bd-article img.sphx-glr-multi-img");
    for (var i = 0; i < figures.length; i++) {
      var img = figures[i];
      if (img.closest("a")) continue;
      var link = document.createElement("a");
      link.href = largest(img);
      link.className = "pg-zoom";
      link.target = "_blank";
      link.rel = "noopener";
      link.title = "Open the full-size image";
      img.parentNode.insertBefore(link, img);
      link.appendChild(img);
    }
  }
  // The GPU switcher is the theme's version switcher. Its JSON (_static/switcher.json)
  // gives each GPU's build relative to the site's root, and the theme writes each
  // link as that folder followed by this page's path, which the browser would read
  // relative to this page: resolve them from the site's root instead, so the switch
  // lands on the same page wherever the site is served.
  function gpuSwitcher() {
    var here = document.documentElement.dataset.content_root || "";
    var up = typeof DOCUMENTATION_OPTIONS !== "undefined" && DOCUMENTATION_OPTIONS.pg_site_root || "";
    var root = new URL(here + up, location.href);
    var menus = document.querySelectorAll(".version-switcher__menu");
    function resolve(menu) {
      var links = menu.querySelectorAll("a[href]:not([data-pg-resolved])");
      for (var i = 0; i < links.length; i++) {
        links[i].setAttribute("href", new URL(links[i].getAttribute("href"), root).href);
        links[i].dataset.pgResolved = "1";
      }
    }
    for (var i = 0; i < menus.length; i++) {
      resolve(menus[i]);
      new MutationObserver(resolve.bind(null, menus[i])).observe(menus[i], { childList: true });
    }
  }
  function ready() {
    mark();
    zoomable();
    gpuSwitcher();
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", ready);
  } else {
    ready();
  }
})();
