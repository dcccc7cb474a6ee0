// The studio's only script: while a form is being sent, its buttons are disabled (a second click
// would be refused by the server anyway) and a waiting hint is shown. Everything works without it.
document.addEventListener("submit", function (event) {
  var form = event.target;
  window.setTimeout(function () {
    form.querySelectorAll("button").forEach(function (button) {
      button.disabled = true;
      if (button.dataset.waiting) { button.textContent = button.dataset.waiting; }
    });
  }, 0);
});
