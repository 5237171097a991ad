// Fulcrum's partial Plotly bundle: plotly.js's core (which registers scatter and the layout
// components: shapes, images, legend, hover, grid...) plus exactly the other trace types the
// console's modules (static/console/) draw. plotly.js's documented way to pick modules: require
// 'plotly.js/lib/core', then Plotly.register the trace modules you need (README, "Modules").
// Built by `make plotly` into static/vendor/plotly-fulcrum.min.js; a trace type a module
// starts drawing must be added here (tests/console/test_plotly_bundle.py checks).
'use strict';

var Plotly = require('plotly.js/lib/core');

Plotly.register([
    require('plotly.js/lib/scatter'), // core registers it already; named so the list is whole
    require('plotly.js/lib/bar'),
    require('plotly.js/lib/treemap'),
]);

module.exports = Plotly;
