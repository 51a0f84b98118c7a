// The rule editor's line numbers: one per line of the text, scrolled with it. A validation
// error's line is marked by the server (it re-renders the gutter); typing clears the mark.
(function () {
  function renumber(textarea, gutter) {
    var count = textarea.value.split("\n").length;
    if (textarea.value.endsWith("\n")) count -= 1;
    count = Math.max(count, 1);
    var marked = {};
    gutter.querySelectorAll(".error-line").forEach(function (el) { marked[el.dataset.line] = true; });
    if (gutter.querySelectorAll(".ln").length === count) return;
    var html = "";
    for (var n = 1; n <= count; n++) {
      html += '<span class="ln' + (marked[n] ? " error-line" : "") + '" data-line="' + n + '">' + n + "</span>\n";
    }
    gutter.innerHTML = html;
  }
  function wire() {
    var textarea = document.getElementById("rule-text");
    if (!textarea) return;
    textarea.addEventListener("input", function () {
      var gutter = document.getElementById("gutter");
      gutter.querySelectorAll(".error-line").forEach(function (el) { el.classList.remove("error-line"); });
      renumber(textarea, gutter);
    });
    textarea.addEventListener("scroll", function () {
      document.getElementById("gutter").scrollTop = textarea.scrollTop;
    });
  }
  document.addEventListener("DOMContentLoaded", wire);
})();
