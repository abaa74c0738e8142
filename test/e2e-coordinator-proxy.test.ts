import { coordinatorSuite } from './e2e-coordinator-suite.js';

coordinatorSuite('proxy');
