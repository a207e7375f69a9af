// Demo Shop behaviour: cookie banner, newsletter pop-up, delayed search, filters, checkout checks.
(function () {
  "use strict";

  function postJSON(url, data) {
    return fetch(url, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(data || {}),
      credentials: "same-origin",
      keepalive: true,  // a dismissal sent just before a navigation still arrives
    }).then(function (r) { return r.json(); });
  }

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text !== undefined) node.textContent = text;
    return node;
  }

  // -- cookie banner: remembered server-side, so it is asked once per session
  var banner = document.getElementById("cookie-banner");
  if (banner) {
    var consentForm = banner.querySelector("form");
    consentForm.addEventListener("submit", function (event) {
      var choice = event.submitter ? event.submitter.value : "accepted";
      event.preventDefault();
      postJSON("/api/consent", { choice: choice }).then(function () {
        banner.remove();
      }, function () { consentForm.submit(); });
    });
  }

  // -- newsletter pop-up: opens once the session is newsletter-delay ms old
  var modal = document.getElementById("newsletter");
  var delay = document.body.getAttribute("data-newsletter-delay");
  if (modal && delay !== null) {
    var form = document.getElementById("nl-form");
    var email = document.getElementById("nl-email");
    var error = document.getElementById("nl-error");
    var done = document.getElementById("nl-done");
    var open = false;

    var close = function () {
      modal.hidden = true;
      open = false;
    };
    var dismiss = function () {
      if (!open) return;
      close();
      postJSON("/api/newsletter/dismiss");
    };
    window.setTimeout(function () {
      if (!document.getElementById("newsletter")) return;
      modal.hidden = false;
      open = true;
      email.focus();
    // The delay counts from the session's first page; the page's clock starts with this navigation.
    }, Math.max(0, (parseInt(delay, 10) || 0) - performance.now()));

    modal.querySelectorAll("[data-dismiss]").forEach(function (b) { b.addEventListener("click", dismiss); });
    modal.querySelectorAll("[data-close]").forEach(function (b) { b.addEventListener("click", close); });
    document.addEventListener("keydown", function (event) {
      if (event.key === "Escape" && open) dismiss();
    });
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var value = email.value.trim();
      if (!/^[^@\s]+@[^@\s]+\.[^@\s]+$/.test(value)) {
        error.textContent = "Please enter a valid email address.";
        error.hidden = false;
        email.setAttribute("aria-invalid", "true");
        email.focus();
        return;
      }
      postJSON("/api/newsletter", { email: value }).then(function (data) {
        if (!data.ok) {
          error.textContent = data.error;
          error.hidden = false;
          return;
        }
        error.hidden = true;
        email.removeAttribute("aria-invalid");
        form.hidden = true;
        done.hidden = false;
        done.querySelector("button").focus();
      });
    });
  }

  // -- search: the page asks the API, which answers after a delay, then renders the results
  var search = document.getElementById("search");
  if (search) {
    var query = search.getAttribute("data-query");
    var status = document.getElementById("search-status");
    var list = document.getElementById("search-results");
    fetch("/api/search?q=" + encodeURIComponent(query), { credentials: "same-origin" })
      .then(function (r) { return r.json(); })
      .then(function (data) {
        var n = data.results.length;
        status.textContent = n === 0
          ? "No products found for “" + query + "”."
          : n + (n === 1 ? " product" : " products") + " found for “" + query + "”";
        data.results.forEach(function (p) {
          var card = el("article", { "class": "card" });
          var thumb = el("div", { "class": "thumb", "aria-hidden": "true", "style": "--swatch:" + p.swatch }, p.initials);
          var h = el("h2", { "class": "card-title" });
          h.appendChild(el("a", { href: p.url }, p.name));
          var rating = el("p", { "class": "rating" });
          rating.appendChild(el("span", { "class": "stars", "aria-hidden": "true" }, p.stars));
          rating.appendChild(document.createTextNode(
            " Rated " + p.rating.toFixed(1) + " out of 5 (" + p.reviews + " reviews)"));
          card.appendChild(thumb);
          card.appendChild(h);
          card.appendChild(el("p", { "class": "price" }, p.price_text));
          card.appendChild(rating);
          card.appendChild(el("p", { "class": "colours" }, "Colours: " + p.colours));
          list.appendChild(card);
        });
      }, function () {
        status.textContent = "Search is not available right now. Please try again.";
      });
  }

  // -- listing filters apply as soon as a choice changes
  document.querySelectorAll("select[data-autosubmit]").forEach(function (select) {
    select.addEventListener("change", function () {
      if (select.form.requestSubmit) select.form.requestSubmit(); else select.form.submit();
    });
  });

  // -- checkout: the same checks as the server, shown before the round trip
  var checkout = document.getElementById("checkout-form");
  if (checkout) {
    var luhn = function (digits) {
      var sum = 0;
      for (var i = 0; i < digits.length; i++) {
        var d = parseInt(digits.charAt(digits.length - 1 - i), 10);
        if (i % 2 === 1) { d *= 2; if (d > 9) d -= 9; }
        sum += d;
      }
      return sum % 10 === 0;
    };
    var rules = {
      name: function (v) { return v.length >= 2 ? null : "Enter your full name."; },
      email: function (v) {
        return /^[^@\s]+@[^@\s]+\.[^@\s]+$/.test(v) ? null : "Enter a valid email address, like name@example.com.";
      },
      address: function (v) { return v.length >= 3 ? null : "Enter your street address."; },
      city: function (v) { return v.length >= 2 ? null : "Enter your city."; },
      postcode: function (v) {
        return /^[A-Za-z0-9][A-Za-z0-9 -]{1,8}[A-Za-z0-9]$/.test(v) ? null : "Enter a valid postal code.";
      },
      card: function (v) {
        var digits = v.replace(/[\s-]/g, "");
        return /^\d{16}$/.test(digits) && luhn(digits) ? null : "Enter a valid 16-digit card number.";
      },
      expiry: function (v) {
        var m = /^(\d{2})\s*\/\s*(\d{2})$/.exec(v);
        if (!m || +m[1] < 1 || +m[1] > 12) return "Enter the expiry date as MM/YY.";
        var now = new Date();
        var year = 2000 + +m[2], month = +m[1];
        if (year < now.getFullYear() || (year === now.getFullYear() && month < now.getMonth() + 1)) {
          return "This card has expired.";
        }
        return null;
      },
      cvc: function (v) { return /^\d{3}$/.test(v) ? null : "Enter the 3-digit security code."; },
    };
    checkout.addEventListener("submit", function (event) {
      var first = null, count = 0;
      Object.keys(rules).forEach(function (key) {
        var input = checkout.elements[key];
        var message = rules[key](input.value.trim());
        var note = document.getElementById("err-" + key);
        if (message) {
          count += 1;
          input.setAttribute("aria-invalid", "true");
          input.setAttribute("aria-describedby", "err-" + key);
          note.textContent = message;
          note.hidden = false;
          if (!first) first = input;
        } else {
          input.removeAttribute("aria-invalid");
          note.textContent = "";
          note.hidden = true;
        }
      });
      if (!count) return;
      event.preventDefault();
      var summary = document.getElementById("checkout-errors");
      if (!summary) {
        summary = el("div", { id: "checkout-errors", "class": "alert", role: "alert" });
        checkout.parentNode.parentNode.insertBefore(summary, checkout.parentNode);
      }
      summary.textContent = "";
      summary.appendChild(el("p", {}, "Please correct the " + count + " highlighted field" + (count === 1 ? "" : "s") + "."));
      first.focus();
    });
  }
})();
