/* The book's own page behaviour (listed in html_js_files; tests/test_browser.py checks each part).
 *
 * 1. Menu and contents buttons. pydata-sphinx-theme 0.17.1 wires its drawers to the *first*
 *    .primary-toggle / .secondary-toggle of the page, and sphinx-book-theme 1.3.0 wires its
 *    "collapse the sidebar" to the same first button; but that one (in the theme's navbar) is
 *    hidden by sphinx-book-theme, which shows its own buttons in the article header. A click on a
 *    visible button is passed to the wired one: below 992 px the drawer opens, above it the
 *    sidebar collapses and comes back.
 * 2. Figures enlarge: a click (or Enter) on a figure opens it at full size in a dialog that scrolls
 *    (a phone shows every figure at under half its size); Escape, the close button or a click
 *    outside the image closes it.
 * 3. Animations: their frames are separate files (the build's _ext/book_pages.py); the first touch
 *    of a player's controls fetches all its frames, so that playing is smooth.
 * 4. Numbered equations wider than their column put the number under the formula, which then
 *    scrolls sideways on its own line instead of sliding under the number.
 * 5. Tables wider than their column say that they scroll sideways.
 * 6. Static explorers (tokendynamics.book.static_explorers): a control moved shows its precomputed
 *    state (image, status line, value); the states next to it on every axis are fetched ahead,
 *    from the first touch or focus of the explorer on.
 */
(function () {
  "use strict";

  const ready = (cb) => {
    if (document.readyState !== "loading") cb();
    else document.addEventListener("DOMContentLoaded", cb);
  };

  // ---- 1. menu ("hamburger") and contents buttons
  function wireToggles() {
    for (const cls of [".primary-toggle", ".secondary-toggle"]) {
      const buttons = Array.from(document.querySelectorAll(cls));
      const wired = buttons[0];
      buttons.slice(1).forEach((button) => {
        button.addEventListener("click", (event) => {
          event.preventDefault();
          event.stopPropagation();
          wired.click();
        });
      });
    }
  }

  // ---- 2. figures enlarge on click
  let zoom = null;
  function zoomDialog() {
    if (zoom) return zoom;
    zoom = document.createElement("dialog");
    zoom.className = "book-zoom";
    zoom.setAttribute("aria-label", "Figure at full size");
    zoom.innerHTML =
      '<div class="book-zoom-bar"><a class="book-zoom-open" target="_blank" rel="noopener">open the image</a>' +
      '<button type="button" class="book-zoom-close" aria-label="Close">×</button></div>' +
      '<div class="book-zoom-frame"><img alt=""></div><p class="book-zoom-caption"></p>';
    zoom.querySelector(".book-zoom-close").addEventListener("click", () => zoom.close());
    // Sphinx's sphinx_highlight.js swallows Escape (as pydata-sphinx-theme notes for its own dialogs)
    zoom.addEventListener("keydown", (event) => {
      if (event.key === "Escape") {
        event.preventDefault();
        event.stopPropagation();
        zoom.close();
      }
    });
    zoom.addEventListener("click", (event) => {
      if (event.target === zoom || event.target.classList.contains("book-zoom-frame")) zoom.close();
    });
    document.body.appendChild(zoom);
    return zoom;
  }
  function enlarge(img) {
    const dialog = zoomDialog();
    const big = dialog.querySelector(".book-zoom-frame img");
    big.src = img.currentSrc || img.src;
    big.alt = img.alt;
    dialog.querySelector(".book-zoom-open").href = big.src;
    const figure = img.closest("figure");
    const caption = figure && figure.querySelector("figcaption");
    let words = "";
    if (caption) {
      const copy = caption.cloneNode(true);
      copy.querySelectorAll(".headerlink").forEach((link) => link.remove());
      words = copy.textContent.replace(/\s+/g, " ").trim();
    }
    dialog.querySelector(".book-zoom-caption").textContent = words;
    dialog.showModal();
  }
  function enlargeableFigures() {
    document.querySelectorAll("article img").forEach((img) => {
      if (img.closest(".animation, a, .book-zoom")) return;
      if (!/\/_images\//.test(img.getAttribute("src") || "")) return;
      img.classList.add("book-enlargeable");
      img.tabIndex = 0;
      img.setAttribute("role", "button");
      img.title = "Enlarge the figure";
      img.addEventListener("click", () => enlarge(img));
      img.addEventListener("keydown", (event) => {
        if (event.key === "Enter" || event.key === " ") {
          event.preventDefault();
          enlarge(img);
        }
      });
    });
  }

  // ---- 3. animation frames fetched when a player is first used
  function framesOnDemand() {
    document.querySelectorAll(".animation").forEach((box) => {
      const img = box.querySelector("img[id^='_anim_img']");
      if (!img) return;
      const player = () => window["anim" + img.id.replace("_anim_img", "")];
      const fetchAll = () => {
        const anim = player();
        if (!anim || anim.book_fetched) return;
        anim.book_fetched = true;
        anim.frames.forEach((frame) => {
          if (!(frame instanceof Image)) new Image().src = frame.src;
        });
      };
      for (const type of ["pointerdown", "focusin", "keydown"]) {
        box.addEventListener(type, fetchAll, { once: true });
      }
    });
  }

  // ---- 4. equation numbers under formulas that do not fit
  function placeNumbers() {
    document.querySelectorAll("div.math").forEach((block) => {
      const number = block.querySelector(":scope > span.eqno");
      const math = block.querySelector(":scope > mjx-container > mjx-math");
      if (!number || !math) return;
      block.classList.remove("book-eqno-below");
      const gap = parseFloat(getComputedStyle(block).columnGap) || 0;
      if (math.getBoundingClientRect().width + number.getBoundingClientRect().width + gap > block.clientWidth) {
        block.classList.add("book-eqno-below");
      }
    });
  }

  // ---- 5. tables that scroll say so
  function markScrollingTables() {
    document.querySelectorAll(".pst-scrollable-table-container").forEach((box) => {
      let hint = box.previousElementSibling;
      if (!hint || !hint.classList.contains("book-scroll-hint")) {
        hint = document.createElement("div");
        hint.className = "book-scroll-hint";
        hint.setAttribute("aria-hidden", "true");
        hint.textContent = "⟷ this table scrolls sideways";
        box.before(hint);
      }
      const update = () => {
        const scrolls = box.scrollWidth > box.clientWidth + 1;
        box.classList.toggle("book-scrolls", scrolls);
        box.classList.toggle("book-scrolled-to-end", box.scrollLeft + box.clientWidth >= box.scrollWidth - 1);
        hint.hidden = !scrolls;
      };
      box.addEventListener("scroll", update, { passive: true });
      update();
    });
  }

  // ---- 6. static explorers: precomputed states paged by their controls
  function staticExplorers() {
    document.querySelectorAll(".static-explorer").forEach((box) => {
      const data = JSON.parse(box.querySelector("script.static-explorer-states").textContent);
      const fields = Array.from(box.querySelectorAll("[data-axis]"));
      const img = box.querySelector("img.static-explorer-image");
      const status = box.querySelector(".static-explorer-status");
      const fetched = new Map();
      const index = (at) => at.reduce((k, p, axis) => k * data.shape[axis] + p, 0);
      const position = () => fields.map((field) => Number(field.value));
      const prefetch = (at) =>
        at.forEach((p, axis) =>
          [p - 1, p + 1].forEach((q) => {
            if (q < 0 || q >= data.shape[axis]) return;
            const k = index(at.map((r, b) => (b === axis ? q : r)));
            if (fetched.has(k)) return;
            fetched.set(k, new Image()); // kept: the browser holds the picture until it is shown
            fetched.get(k).src = data.frames[k];
          }),
        );
      const show = () => {
        const at = position();
        const k = index(at);
        img.src = data.frames[k];
        img.alt = "The explorer for the state chosen above: " + data.status[k];
        status.textContent = data.status[k];
        status.classList.toggle("static-explorer-error", data.errors.includes(k));
        fields
          .filter((field) => field.type === "range")
          .forEach((field) => {
            const value = data.labels[field.dataset.axis][at[field.dataset.axis]];
            field.parentElement.querySelector("output").textContent = value;
            field.setAttribute("aria-valuetext", value);
          });
        prefetch(at);
      };
      fields.forEach((field) => field.addEventListener("input", show));
      for (const type of ["pointerenter", "focusin", "touchstart"]) {
        box.addEventListener(type, () => prefetch(position()), { once: true, passive: true });
      }
    });
  }

  let pending = null;
  const relayout = () => {
    window.cancelAnimationFrame(pending);
    pending = window.requestAnimationFrame(() => {
      placeNumbers();
      markScrollingTables();
    });
  };

  ready(() => {
    wireToggles();
    enlargeableFigures();
    framesOnDemand();
    staticExplorers();
    markScrollingTables();
    window.addEventListener("resize", relayout);
    const mathjax = window.MathJax && window.MathJax.startup && window.MathJax.startup.promise;
    if (mathjax) mathjax.then(relayout);
    else window.addEventListener("load", relayout);
  });
})();
