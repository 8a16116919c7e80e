'use strict';
const layers = require('./layers');
const optim = require('./optim');
const state = require('./state');

module.exports = { ...layers, SGD: optim.SGD, LARS: optim.LARS, Muon: optim.Muon, Adam: optim.Adam, AdamW: optim.AdamW, LAMB: optim.LAMB, Optimizer: optim.Optimizer, ...state };
