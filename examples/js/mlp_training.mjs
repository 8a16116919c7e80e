// Training a small MLP with Adam on a synthetic task (is the sum of the inputs positive?), eagerly:
// each step is one Realize request with the new parameters, the optimizer state and the loss.
import { Tensor, nn } from 'polygrad';

Tensor.manualSeed(42);

class MLP {
  constructor() {
    this.l1 = new nn.Linear(16, 32);
    this.l2 = new nn.Linear(32, 2);
  }

  forward(x) {
    return this.l2.forward(this.l1.forward(x).relu());
  }
}

const model = new MLP();
const opt = new nn.Adam(nn.getParameters(model), { lr: 0.01 });
const x = Tensor.randn(128, 16);
const y = x.sum({ axis: 1 }).gt(0).cast('int32'); // labels computed on the daemon, too

let first;
let loss;
for (let i = 0; i < 60; i++) {
  loss = model.forward(x).crossEntropy(y);
  opt.zeroGrad();
  loss.backward(); // lazy: gradients are more graph, expanded by the daemon
  await opt.step();
  if (i === 0) first = await loss.item();
}
const last = await loss.item();
const accuracy = await model.forward(x).argmax({ axis: 1 }).eq(y).cast('float32').mean().item();
console.log(`loss ${first.toFixed(4)} -> ${last.toFixed(4)}, accuracy ${accuracy.toFixed(3)}`);
if (!(last < first)) throw new Error('the loss did not go down');
