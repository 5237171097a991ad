// Builds static/vendor/plotly-fulcrum.min.js from js/plotly-fulcrum.js (`make plotly` runs it
// after `npm ci`). The options follow plotly.js's own esbuild build (its esbuild-config.js: an
// IIFE defining the global Plotly, ES2016, `global` as `window`, no AMD), minified, and like its
// distributed bundles (tasks/compress_attributes.js) without the attributes' documentation
// (descriptions, for its schema and reference pages, never read to draw). A CSS file plotly.js
// requires only when a map trace is registered (none here) is an empty module. The output is
// the same bytes on every build from the same package-lock.json.
import {readFileSync} from 'node:fs';
import {readFile} from 'node:fs/promises';
import {gzipSync} from 'node:zlib';
import {dirname, join} from 'node:path';
import {fileURLToPath} from 'node:url';
import * as esbuild from 'esbuild';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const outfile = 'static/vendor/plotly-fulcrum.min.js';
const plotly = JSON.parse(readFileSync(join(root, 'node_modules/plotly.js/package.json'), 'utf8'));
// plotly.js's own banner (version, copyright, licence), as its distributed bundles open.
const upstream = readFileSync(join(root, 'node_modules/plotly.js/dist/plotly.js'), 'utf8');
const banner = upstream.slice(0, upstream.indexOf('*/') + 2);
if (!banner.startsWith('/**') || !banner.includes(`plotly.js v${plotly.version}`)) {
    throw new Error(`no plotly.js v${plotly.version} banner at the head of dist/plotly.js`);
}

// The attributes' documentation in plotly.js's sources, the forms its own build removes:
// `description: '...'` (to the line's last quote), `description: [...].join(...)` (over lines),
// `hrName: '...'`, and the `requiredOpts`/`otherOpts` lists of its value types. Other forms
// (a description a function builds) stay: valid code, a few bytes.
const DOCS = [
    /\s*(?:description|hrName): '.*',?/g,
    /\s*description: \[[\s\S]*?\]\.join\([\s\S]*?\),?/g,
    /\s*(?:requiredOpts|otherOpts): \[[\s\S]*?\],?/g,
];
const withoutDocs = {
    name: 'plotly-without-docs',
    setup(build) {
        build.onLoad({filter: /[\\/]node_modules[\\/]plotly\.js[\\/]src[\\/].*\.js$/}, async (args) => {
            const source = await readFile(args.path, 'utf8');
            return {contents: DOCS.reduce((text, re) => text.replace(re, ''), source), loader: 'js'};
        });
    },
};

await esbuild.build({
    absWorkingDir: root,
    entryPoints: ['js/plotly-fulcrum.js'],
    outfile,
    bundle: true,
    minify: true,
    format: 'iife',
    globalName: 'Plotly',
    target: 'es2016',
    define: {global: 'window', 'define.amd': 'false'},
    loader: {'.css': 'empty'},
    plugins: [withoutDocs],
    banner: {js: `${banner}\n// Fulcrum's partial bundle (js/plotly-fulcrum.js, esbuild ${esbuild.version}): ` +
        'plotly.js/lib/core and the trace modules that file registers; make plotly builds it.'},
    logLevel: 'warning',
});

const built = readFileSync(join(root, outfile));
const kb = (n) => `${(n / 1000).toFixed(0)} kB`;
console.log(`${outfile}: plotly.js ${plotly.version}, ${kb(built.length)}, ` +
    `${kb(gzipSync(built, {level: 6}).length)} gzipped`);
