// Health hints of registered metrics (issue 10, item 3). Registers its chart add-on (addons.js).
