import { Utility } from '@aws-lambda-powertools/commons';

const utility = new Utility();
const coldStarts = [];

export const handler = async () => {
  coldStarts.push(utility.getColdStart());
  return { coldStarts, initializationType: process.env.AWS_LAMBDA_INITIALIZATION_TYPE };
};
