// ESLint for the front end's ES modules (static/js) and their node tests (tests/js): `make lint`.
// Small and strict: the recommended rules, plus the ones that catch real mistakes in plain
// browser modules (loose equality, shadowed and unused names, reassigned parameters, globals).
// Types are tsc's (tsconfig.json).

'use strict';

const js = require('@eslint/js');
const globals = require('globals');

const STRICT = {
  eqeqeq: ['error', 'always', { null: 'ignore' }],
  'no-var': 'error',
  'prefer-const': 'error',
  'no-unused-vars': ['error', { args: 'after-used', argsIgnorePattern: '^_', caughtErrors: 'none' }],
  'no-shadow': ['error', { builtinGlobals: false }],
  'no-use-before-define': ['error', { functions: false, classes: false, variables: true }],
  'no-implicit-globals': 'error',
  'no-implied-eval': 'error',
  'no-new-func': 'error',
  'no-eval': 'error',
  'no-throw-literal': 'error',
  'prefer-promise-reject-errors': 'error',
  'no-return-assign': ['error', 'except-parens'],
  'no-self-compare': 'error',
  'no-unmodified-loop-condition': 'error',
  'no-unreachable-loop': 'error',
  'no-promise-executor-return': 'error',
  'no-constructor-return': 'error',
  'no-duplicate-imports': 'error',
  'no-console': ['error', { allow: ['warn', 'error'] }],
  'object-shorthand': ['error', 'properties'],
  radix: 'error',
};

module.exports = [
  js.configs.recommended,
  {
    linterOptions: { reportUnusedDisableDirectives: 'error' },
  },
  {
    files: ['static/js/**/*.js'],
    languageOptions: {
      ecmaVersion: 2022,
      sourceType: 'module',
      // Plotly (a classic script, loaded on demand) is only ever read as window.Plotly.
      globals: globals.browser,
    },
    rules: STRICT,
  },
  {
    files: ['tests/js/**/*.mjs'],
    languageOptions: { ecmaVersion: 2022, sourceType: 'module', globals: globals.node },
    rules: STRICT,
  },
  {
    files: ['eslint.config.js'],
    languageOptions: { sourceType: 'commonjs', globals: globals.node },
  },
];
