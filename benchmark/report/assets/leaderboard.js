// dmlbench report pages: sort any table.sortable by a header click, filter a board's rows by
// method name and verdict. Inlined by dmlbench.report.html: no library, no network.
(function () {
  "use strict";

  var MISSING = ["", "\u2014", "-", "n/a"];  // cells without a value ("—") sort last

  function text(cell) {
    return cell ? cell.textContent.trim() : "";
  }

  // The number a cell shows: its data-value, written by the page from the report's numbers
  // (a mean, not its rounded text); NaN for a text cell. The text is never parsed.
  function number(cell) {
    return cell && cell.hasAttribute("data-value")
      ? parseFloat(cell.getAttribute("data-value"))
      : NaN;
  }

  // A column is numeric when every cell with a value carries a number.
  function isNumeric(rows, col) {
    var seen = false;
    for (var i = 0; i < rows.length; i++) {
      var cell = rows[i].cells[col];
      if (MISSING.indexOf(text(cell)) >= 0) continue;
      if (isNaN(number(cell))) return false;
      seen = true;
    }
    return seen;
  }

  function compare(ca, cb, numeric) {
    if (numeric) return number(ca) - number(cb);
    return text(ca).localeCompare(text(cb), undefined, { sensitivity: "base" });
  }

  // First click: numbers descending (best first where higher is better), text ascending;
  // a further click on the same header reverses.
  function sortBy(table, th) {
    var col = th.cellIndex;
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var numeric = isNumeric(rows, col);
    var now = th.getAttribute("aria-sort");
    var ascending = now ? now === "descending" : !numeric;
    var heads = table.tHead.rows[0].cells;
    for (var i = 0; i < heads.length; i++) heads[i].removeAttribute("aria-sort");
    th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    rows.sort(function (ra, rb) {
      var ca = ra.cells[col], cb = rb.cells[col];
      var ma = MISSING.indexOf(text(ca)) >= 0, mb = MISSING.indexOf(text(cb)) >= 0;
      if (ma || mb) return ma - mb;  // missing values last in either order
      var c = compare(ca, cb, numeric);
      return ascending ? c : -c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }

  function makeSortable(table) {
    if (!table.tHead) return;
    var heads = table.tHead.rows[0].cells;
    for (var i = 0; i < heads.length; i++) {
      heads[i].title = "sort by this column (click again to reverse)";
      heads[i].addEventListener("click", function (ev) {
        sortBy(table, ev.currentTarget);
      });
    }
  }

  // Show a row when its method contains the typed text and its verdict is ticked
  // (rows without a verdict cell, e.g. external models, follow the name filter only).
  function applyFilters(board) {
    var box = board.querySelector("input.method-filter");
    var query = box ? box.value.trim().toLowerCase() : "";
    var ticked = {};
    var boxes = board.querySelectorAll("input.verdict-filter");
    for (var i = 0; i < boxes.length; i++) ticked[boxes[i].value] = boxes[i].checked;
    var rows = board.querySelectorAll("tbody tr");
    var shown = 0;
    for (var j = 0; j < rows.length; j++) {
      var row = rows[j];
      var name = text(row.cells[0]).toLowerCase();
      var cell = row.querySelector("td[data-verdict]");
      var verdictOk = !cell || ticked[cell.getAttribute("data-verdict")] !== false;
      row.hidden = !(name.indexOf(query) >= 0 && verdictOk);
      if (!row.hidden) shown++;
    }
    var count = board.querySelector(".shown");
    if (count) count.textContent = shown + " of " + rows.length + " rows shown";
  }

  function makeFilterable(board) {
    var inputs = board.querySelectorAll("input.method-filter, input.verdict-filter");
    for (var i = 0; i < inputs.length; i++) {
      inputs[i].addEventListener("input", function () { applyFilters(board); });
      inputs[i].addEventListener("change", function () { applyFilters(board); });
    }
    applyFilters(board);
  }

  function init() {
    Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), makeSortable);
    Array.prototype.forEach.call(document.querySelectorAll(".board"), makeFilterable);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
