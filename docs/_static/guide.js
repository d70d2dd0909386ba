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
  // A click (a tap) on a figure opens the full-size (2x) image over the page, at least at
  // the size it was drawn for and as wide as the screen allows; a click on the image shows
  // every pixel of it, and the close button, Escape, a click beside the image or the
  // browser's Back closes it. A chapter's figures come with their link to the 2x image
  // (docs/_figures.py), which without JavaScript opens the image itself; other figures
  // (a notebook's) get one here.
  var FIGURES = ".bd-article img.sphx-glr-single-img, .bd-article img.sphx-glr-multi-img, .bd-article .cell_output img";
  // pushed: the open figure has a history entry of its own (Back closes it);
  // goingBack: a close has asked the browser to drop that entry, and it has not yet.
  var box = null, shown = null, pushed = false, goingBack = false, before = null;
  function lightbox() {
    if (box) return box;
    box = document.createElement("div");
    box.className = "pg-lightbox";
    box.hidden = true;
    box.setAttribute("role", "dialog");
    box.setAttribute("aria-modal", "true");
    box.setAttribute("aria-label", "Figure at full size");
    box.innerHTML = '<button type="button" aria-label="Close the figure">\u00d7</button>' +
      '<span class="pg-lightbox-hint"></span><img alt="">';
    var img = box.querySelector("img"), hint = box.querySelector(".pg-lightbox-hint");
    var touch = window.matchMedia && window.matchMedia("(hover: none)").matches;
    hint.textContent = (touch ? "tap" : "click") + " the figure for every pixel \u00b7 " +
      (touch ? "drag to pan" : "scroll to pan") + " \u00b7 \u00d7 closes";
    box.querySelector("button").addEventListener("click", close);
    box.addEventListener("click", function (ev) { if (ev.target === box || ev.target === hint) close(); });
    img.addEventListener("click", function () { size(img.dataset.full === "1" ? "fit" : "full"); });
    img.addEventListener("load", function () { size("fit"); });
    document.addEventListener("keydown", function (ev) { if (ev.key === "Escape" && !box.hidden) close(); });
    window.addEventListener("popstate", function () {
      if (goingBack) {
        goingBack = false;
        return;
      }
      pushed = false;
      if (!box.hidden) hide();
    });
    document.body.appendChild(box);
    return box;
  }
  // "fit": the size the figure was drawn for (its 1x image), or the screen's width where that
  // is wider, up to twice that size; "full": one screen pixel per pixel of the largest image.
  function size(how) {
    var img = box.querySelector("img"), full = img.naturalWidth;
    if (!full || !shown) return;
    var drawn = shown.naturalWidth || full, room = document.documentElement.clientWidth - 16;
    var fit = Math.max(drawn, Math.min(room, Math.max(full, 2 * drawn)));
    img.style.width = (how === "full" ? Math.max(full, fit) : fit) + "px";
    img.dataset.full = how === "full" ? "1" : "0";
  }
  function open(link, figure) {
    var b = lightbox(), img = b.querySelector("img");
    shown = figure;
    before = document.activeElement;
    img.alt = figure.alt || "";
    img.style.width = "";
    if (img.getAttribute("src") === link.getAttribute("href") && img.complete) size("fit");
    else img.src = link.getAttribute("href");
    b.hidden = false;
    b.scrollTop = 0;
    b.scrollLeft = 0;
    document.body.classList.add("pg-lightbox-open");
    if (!pushed && !goingBack) {
      history.pushState({ pgLightbox: true }, "");
      pushed = true;
    }
    b.querySelector("button").focus();
  }
  function hide() {
    box.hidden = true;
    document.body.classList.remove("pg-lightbox-open");
    if (before && before.focus) before.focus();
  }
  function close() {
    hide();
    if (pushed) {
      pushed = false;
      goingBack = true;
      history.back();
    }
  }
  function zoomable() {
    var figures = document.querySelectorAll(FIGURES);
    for (var i = 0; i < figures.length; i++) {
      var img = figures[i], link = img.closest("a.pg-zoom");
      if (!link) {
        if (img.closest("a")) continue; // a figure that links elsewhere keeps its link
        link = document.createElement("a");
        link.href = largest(img);
        link.className = "pg-zoom";
        link.title = "Open the figure at full size";
        img.parentNode.insertBefore(link, img);
        link.appendChild(img);
      }
      link.addEventListener("click", function (ev) {
        if (ev.ctrlKey || ev.metaKey || ev.shiftKey || ev.button !== 0) return; // a new tab, as asked
        ev.preventDefault();
        open(this, this.querySelector("img"));
      });
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
  // guide.css keeps each row's first cell in view while a table scrolls sideways. Where the
  // first column spans rows (pandas' grouped index), the rows it spans start with a cell of
  // the second column: that one scrolls with the rest.
  function firstColumn() {
    var tables = document.querySelectorAll(".bd-article table");
    for (var t = 0; t < tables.length; t++) {
      var sections = [tables[t].tHead].concat([].slice.call(tables[t].tBodies), [tables[t].tFoot]);
      sections.forEach(function (section) {
        if (!section) return;
        var spanned = 0;
        for (var r = 0; r < section.rows.length; r++) {
          var first = section.rows[r].cells[0];
          if (spanned > 0) {
            spanned--;
            if (first) first.classList.add("pg-not-first-col");
          } else if (first && first.rowSpan > 1) {
            spanned = first.rowSpan - 1;
          }
        }
      });
    }
  }
  // A figure wider than the column (a phone's) scrolls in its box, .pg-figure: guide.css
  // shows a line under it saying so, on a box marked here as wider than it shows.
  function wideFigures() {
    var touch = window.matchMedia && window.matchMedia("(hover: none)").matches;
    var hint = touch ? "drag the figure sideways for the rest \u00b7 tap it to open it full size"
      : "scroll the figure sideways for the rest \u00b7 click it to open it full size";
    var boxes = document.querySelectorAll(".bd-article .pg-figure");
    for (var i = 0; i < boxes.length; i++) {
      boxes[i].dataset.hint = hint;
      boxes[i].classList.toggle("pg-figure-wide", boxes[i].scrollWidth > boxes[i].clientWidth + 1);
    }
  }
  function ready() {
    mark();
    firstColumn();
    zoomable();
    wideFigures();
    window.addEventListener("resize", wideFigures);
    gpuSwitcher();
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", ready);
  } else {
    ready();
  }
})();
